// The Kubernetes manifests (deploy/kubernetes/) cannot drift from the command line: this test reads
// the coordinator's and the ranks' container args out of them and runs exactly those commands
// here, as the image's entry point (deploy/Dockerfile) would, with only what a cluster provides
// replaced: the Service's name by 127.0.0.1 and a free port, the mounted Secret and volumes by
// temporary files, and JOB_COMPLETION_INDEX set per rank as an Indexed Job sets it. For speed the
// bundled workload is swapped for a small fixture trainer and one epoch (appended flags: the last
// value of a flag wins). Real processes of the CLI, under the runtime running the tests (docs/deploy.md).
import type { ChildProcess } from "node:child_process"
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { fileURLToPath } from "node:url"
import { afterAll, describe, expect, it } from "vitest"
import { Deployment } from "kubernetes-models/apps/v1/Deployment"
import { Job } from "kubernetes-models/batch/v1/Job"
import { PersistentVolumeClaim } from "kubernetes-models/v1/PersistentVolumeClaim"
import { Service } from "kubernetes-models/v1/Service"
import { parseAllDocuments } from "yaml"
import * as Runtime from "../../src/platform/detect.ts"
import { freePort, startCli } from "../cli-process.ts"

const runtime = Runtime.detect()
const root = fileURLToPath(new URL("../../", import.meta.url))
const steady = join(root, "test/fixtures/trainers/steady.ts")
const dir = mkdtempSync(join(tmpdir(), "cohort-k8s-"))
const children: Array<ChildProcess> = []
afterAll(() => {
  for (const child of children) if (child.exitCode === null && child.signalCode === null) child.kill("SIGKILL")
  rmSync(dir, { recursive: true, force: true })
})

interface Manifest {
  readonly kind: string
  readonly metadata: { readonly name: string }
  readonly spec: Record<string, unknown>
}

const manifests = (file: string): Array<Manifest> =>
  parseAllDocuments(readFileSync(join(root, "deploy/kubernetes", file), "utf8")).map((doc) => doc.toJS() as Manifest)

interface Container {
  readonly args: ReadonlyArray<string>
  readonly image: string
  readonly volumeMounts: ReadonlyArray<{ readonly name: string; readonly mountPath: string }>
}
const containerOf = (manifest: Manifest): Container =>
  (manifest.spec.template as { spec: { containers: Array<Container> } }).spec.containers[0]!

/** The value after `flag` in `args`. */
const flag = (args: ReadonlyArray<string>, name: string): string => {
  const at = args.indexOf(name)
  if (at < 0 || at + 1 >= args.length) throw new Error(`${name} is not in ${args.join(" ")}`)
  return args[at + 1]!
}

const replaced = (args: ReadonlyArray<string>, substitutions: ReadonlyArray<readonly [string, string]>): Array<string> =>
  args.map((arg) => substitutions.reduce((text, [from, to]) => text.split(from).join(to), arg))

const run = (args: ReadonlyArray<string>, env: Record<string, string> = {}) => startCli(args, { cwd: dir, env, started: children })

describe(`the Kubernetes manifests run as written (${runtime})`, () => {
  const coordinator = manifests("coordinator.yaml")
  const [claim, service, deployment] = ["PersistentVolumeClaim", "Service", "Deployment"].map((kind) =>
    coordinator.find((m) => m.kind === kind)
  )
  const [job] = manifests("ranks.yaml")

  it("fit together: the Service selects the Deployment's pods on the port serve listens on; the Job's index count is serve's world size; both mount the token Secret", () => {
    expect([service?.kind, deployment?.kind, job?.kind]).toEqual(["Service", "Deployment", "Job"])
    const serve = containerOf(deployment!)
    const join_ = containerOf(job!)
    expect(serve.args[0]).toBe("serve")
    expect(join_.args[0]).toBe("join")
    const port = Number(flag(serve.args, "--listen").split(":")[1])
    const ports = service!.spec.ports as Array<{ port: number; targetPort: number }>
    expect(ports.map((p) => [p.port, p.targetPort])).toEqual([[port, port]])
    expect(service!.spec.selector).toEqual((deployment!.spec.selector as { matchLabels: unknown }).matchLabels)
    expect(join_.args[1]).toBe(`ws://${service!.metadata.name}:${port}/`)
    const worldSize = Number(flag(serve.args, "--world-size"))
    expect([job!.spec.completionMode, job!.spec.completions, job!.spec.parallelism]).toEqual(["Indexed", worldSize, worldSize])
    expect(flag(join_.args, "--rank-from-env")).toBe("JOB_COMPLETION_INDEX")
    const tokenMount = (c: Container) => c.volumeMounts.find((m) => m.name === "token")?.mountPath
    expect(flag(serve.args, "--token-file")).toBe(`${tokenMount(serve)}/token`)
    expect(flag(join_.args, "--token-file")).toBe(`${tokenMount(join_)}/token`)
    expect(serve.image).toBe(join_.image)
    expect(readFileSync(join(root, "deploy/Dockerfile"), "utf8")).toContain(
      `ENTRYPOINT ["node", "/opt/cohort/node_modules/cohort/bin/cohort.mjs"]`
    )
  })

  it("keep the run directory on a PersistentVolumeClaim, so that a coordinator restarted in a new pod takes the run over, within the time its ranks wait", () => {
    const serve = containerOf(deployment!)
    const join_ = containerOf(job!)
    const podSpec = (
      deployment!.spec.template as { spec: { volumes: Array<{ name: string; persistentVolumeClaim?: { claimName: string } }> } }
    ).spec
    const runsMount = serve.volumeMounts.find((m) => flag(serve.args, "--out").startsWith(`${m.mountPath}/`))
    expect(runsMount).toBeDefined()
    expect(podSpec.volumes.find((v) => v.name === runsMount!.name)?.persistentVolumeClaim?.claimName).toBe(claim!.metadata.name)
    // A ReadWriteOnce claim: the old pod must end before the new one mounts it.
    expect(deployment!.spec.strategy).toEqual({ type: "Recreate" })
    expect(flag(serve.args, "--recovery-window-ms")).toBe(flag(join_.args, "--coordinator-reconnect-ms"))
  })

  it("every manifest is valid against the Kubernetes API's schemas (kubernetes-models), and a wrong type is caught", () => {
    const models: Record<string, new (data: object) => { validate: () => void }> = { Job, Deployment, Service, PersistentVolumeClaim }
    const all = [...manifests("coordinator.yaml"), ...manifests("ranks.yaml")]
    expect(all.map((m) => m.kind).sort()).toEqual(["Deployment", "Job", "PersistentVolumeClaim", "Service"])
    for (const manifest of all)
      expect(() => new models[manifest.kind]!(manifest).validate(), `${manifest.kind} ${manifest.metadata.name}`).not.toThrow()
    // The check is real: the Job's per-index back-off limit as a string is refused.
    const job = all.find((m) => m.kind === "Job")!
    expect(() => new Job({ ...job, spec: { ...job.spec, backoffLimitPerIndex: "none" } } as object).validate()).toThrow(
      /backoffLimitPerIndex/
    )
  })

  it("the coordinator's and the ranks' commands, run here, complete a run with clean audits", async () => {
    const serveArgs = containerOf(deployment!).args
    const joinArgs = containerOf(job!).args
    const worldSize = Number(flag(serveArgs, "--world-size"))
    const port = await freePort()
    const tokenFile = join(dir, "token")
    writeFileSync(tokenFile, "kubernetes-test-token-0123456789\n")
    const cluster: ReadonlyArray<readonly [string, string]> = [
      [flag(serveArgs, "--listen"), `127.0.0.1:${port}`],
      [flag(serveArgs, "--token-file"), tokenFile],
      [flag(serveArgs, "--out"), join(dir, "runs")],
      [`${service!.metadata.name}:${flag(serveArgs, "--listen").split(":")[1]}`, `127.0.0.1:${port}`],
      [flag(joinArgs, "--save-dir"), join(dir, "save")]
    ]
    const quick = ["--trainer", steady, "--epochs", "1", "--json"]
    const serve = run([...replaced(serveArgs, cluster), ...quick])
    const ranks = Array.from({ length: worldSize }, (_, index) =>
      run([...replaced(joinArgs, cluster), "--trainer", steady], { JOB_COMPLETION_INDEX: String(index) })
    )
    const codes = await Promise.all(ranks.map((r) => r.exit))
    expect(await serve.exit).toBe(0)
    expect(codes).toEqual(Array.from({ length: worldSize }, () => 0))
    ranks.forEach((r, index) => expect(r.err()).toContain(`as rank ${index} of ${worldSize}`))
    const summary = JSON.parse(serve.out()) as {
      readonly epochs: ReadonlyArray<{ samplesCommitted: number; lost: number; duplicated: number }>
    }
    expect(summary.epochs.map((e) => [e.samplesCommitted, e.lost, e.duplicated])).toEqual([[4800, 0, 0]])
  }, 180_000)
})
