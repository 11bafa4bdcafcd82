// Test certificates made at test time with `openssl` (never committed): a private CA, a server
// certificate it signed for the given addresses, and a second CA that signed nothing of the
// server's (the "wrong CA"). Keys live in a temporary folder removed by `remove`.
import { execFileSync } from "node:child_process"
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"

export interface TestCerts {
  readonly dir: string
  /** PEM files: the CA's certificate, the server's certificate and key, the other CA's certificate. */
  readonly caFile: string
  readonly certFile: string
  readonly keyFile: string
  readonly otherCaFile: string
  readonly ca: string
  readonly cert: string
  readonly key: string
  readonly otherCa: string
  /** The server certificate's SHA-256 fingerprint, `AB:CD:...`. */
  readonly fingerprint256: string
  readonly remove: () => void
}

const openssl = (args: ReadonlyArray<string>, cwd: string): string => {
  try {
    return execFileSync("openssl", args, { cwd, encoding: "utf8", stdio: ["ignore", "pipe", "pipe"] })
  } catch (error) {
    const code = (error as { code?: string }).code
    throw new Error(
      code === "ENOENT" ? "these tests need openssl on PATH (apt-get install -y openssl)" : `openssl ${args[0]} failed: ${String(error)}`
    )
  }
}

const newCa = (dir: string, name: string): void => {
  openssl(
    [
      "req",
      "-x509",
      "-newkey",
      "ec",
      "-pkeyopt",
      "ec_paramgen_curve:prime256v1",
      "-nodes",
      "-days",
      "2",
      "-subj",
      `/CN=${name}`,
      "-keyout",
      `${name}.key`,
      "-out",
      `${name}.pem`
    ],
    dir
  )
}

/** A CA and a server certificate for `localhost`, `127.0.0.1` and each of `addresses`. */
export const makeTestCerts = (addresses: ReadonlyArray<string> = []): TestCerts => {
  const dir = mkdtempSync(join(tmpdir(), "cohort-tls-"))
  newCa(dir, "ca")
  newCa(dir, "other-ca")
  openssl(
    [
      "req",
      "-newkey",
      "ec",
      "-pkeyopt",
      "ec_paramgen_curve:prime256v1",
      "-nodes",
      "-subj",
      "/CN=localhost",
      "-keyout",
      "server.key",
      "-out",
      "server.csr"
    ],
    dir
  )
  const names = ["DNS:localhost", "IP:127.0.0.1", ...addresses.map((address) => `IP:${address}`)]
  writeFileSync(join(dir, "ext.cnf"), `subjectAltName=${names.join(",")}\nbasicConstraints=CA:FALSE\n`)
  openssl(
    [
      "x509",
      "-req",
      "-in",
      "server.csr",
      "-CA",
      "ca.pem",
      "-CAkey",
      "ca.key",
      "-CAcreateserial",
      "-days",
      "2",
      "-extfile",
      "ext.cnf",
      "-out",
      "server.pem"
    ],
    dir
  )
  const fingerprint = openssl(["x509", "-in", "server.pem", "-noout", "-fingerprint", "-sha256"], dir)
  const read = (name: string) => readFileSync(join(dir, name), "utf8")
  return {
    dir,
    caFile: join(dir, "ca.pem"),
    certFile: join(dir, "server.pem"),
    keyFile: join(dir, "server.key"),
    otherCaFile: join(dir, "other-ca.pem"),
    ca: read("ca.pem"),
    cert: read("server.pem"),
    key: read("server.key"),
    otherCa: read("other-ca.pem"),
    fingerprint256: fingerprint.trim().replace(/^.*=/, ""),
    remove: () => rmSync(dir, { recursive: true, force: true })
  }
}
