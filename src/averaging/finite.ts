/**
 * Whether a float32 vector is all finite, fast: every ring rank asks it of its whole model each
 * round (`Ring.isContribution`), and in plain JavaScript the check cost about as much as the
 * rank's share of the reduction itself (one add per value in a dependent chain). A vector made by
 * `alloc` lives in a WebAssembly memory of its own, where a SIMD loop checks four values an
 * instruction; any other vector, or a runtime without WebAssembly SIMD, takes the JavaScript loop.
 * Both give the same answer: false when any value is NaN or an infinity.
 *
 * The module (hand-assembled below, 100 bytes) imports its memory and exports
 * `check(endBytes) -> i32`: 1 when some float32 in bytes [0, endBytes) has an exponent of all
 * ones (NaN or an infinity), else 0. `endBytes` is the vector's bytes rounded up to 16; the
 * padding past the vector stays zero (nothing writes there), so it is finite.
 *
 * @since 0.1.0
 */

import { section, u32 } from "./wasm-bytes.ts"

/** 0x7f800000 in each of four little-endian i32 lanes: a float32's exponent bits. */
const exponentMask = [0x00, 0x00, 0x80, 0x7f, 0x00, 0x00, 0x80, 0x7f, 0x00, 0x00, 0x80, 0x7f, 0x00, 0x00, 0x80, 0x7f]

const moduleBytes = (): Uint8Array => {
  // Locals: 0 = endBytes (param), 1 = at (i32), 2 = seen (v128).
  const body = [
    ...[0x02, 0x01, 0x7f, 0x01, 0x7b], // locals: one i32, one v128
    ...[0x02, 0x40], // block
    ...[0x03, 0x40], //   loop
    ...[0x20, 0x01, 0x20, 0x00, 0x4f, 0x0d, 0x01], //     if at >= endBytes: leave the block
    ...[0x20, 0x02], //     seen
    ...[0x20, 0x01, 0xfd, 0x00, 0x02, 0x00], //     v128.load at (align 4, offset 0)
    ...[0xfd, 0x0c, ...exponentMask, 0xfd, 0x4e], //     and mask
    ...[0xfd, 0x0c, ...exponentMask, 0xfd, 0x37], //     i32x4.eq mask: all ones where not finite
    ...[0xfd, 0x50, 0x21, 0x02], //     seen |= that
    ...[0x20, 0x01, 0x41, 0x10, 0x6a, 0x21, 0x01], //     at += 16
    ...[0x0c, 0x00], //     again
    ...[0x0b, 0x0b], //   end loop, end block
    ...[0x20, 0x02, 0xfd, 0x53], // v128.any_true seen
    0x0b
  ]
  return Uint8Array.from([
    ...[0x00, 0x61, 0x73, 0x6d, 0x01, 0x00, 0x00, 0x00],
    ...section(1, [0x01, 0x60, 0x01, 0x7f, 0x01, 0x7f]), // type 0: (i32) -> i32
    ...section(2, [0x01, 0x01, 0x6d, 0x03, 0x6d, 0x65, 0x6d, 0x02, 0x00, 0x01]), // import "m" "mem": memory, at least 1 page
    ...section(3, [0x01, 0x00]), // function 0 has type 0
    ...section(7, [0x01, 0x05, 0x63, 0x68, 0x65, 0x63, 0x6b, 0x00, 0x00]), // export "check" = function 0
    ...section(10, [0x01, ...u32(body.length), ...body])
  ])
}

interface Wasm {
  readonly Module: new (bytes: Uint8Array) => object
  readonly Instance: new (module: object, imports: object) => { readonly exports: Record<string, unknown> }
  readonly Memory: new (descriptor: { readonly initial: number }) => { readonly buffer: ArrayBuffer }
}

/** The compiled module, or undefined where WebAssembly or its SIMD is missing (then JavaScript checks). */
const compiled: { readonly wasm: Wasm; readonly module: object } | undefined = (() => {
  const wasm = (globalThis as { readonly WebAssembly?: Wasm }).WebAssembly
  if (wasm === undefined) return undefined
  try {
    return { wasm, module: new wasm.Module(moduleBytes()) }
  } catch {
    return undefined
  }
})()

/** The SIMD check of each buffer `alloc` made. */
const checks = new WeakMap<ArrayBufferLike, { readonly check: (endBytes: number) => number; readonly length: number }>()

const pageBytes = 65_536

/**
 * A zeroed float32 vector of `length` values that `allFinite` checks with SIMD (module doc); a
 * plain `Float32Array` where that is not available.
 *
 * @since 0.1.0
 * @category finite
 */
export const alloc = (length: number): Float32Array => {
  if (compiled === undefined || length === 0) return new Float32Array(length)
  const memory = new compiled.wasm.Memory({ initial: Math.max(1, Math.ceil((4 * length + 16) / pageBytes)) })
  const instance = new compiled.wasm.Instance(compiled.module, { m: { mem: memory } })
  checks.set(memory.buffer, { check: instance.exports["check"] as (endBytes: number) => number, length })
  return new Float32Array(memory.buffer, 0, length)
}

/**
 * Whether every value of `values` is finite (no NaN, no infinity). SIMD for a vector from
 * `alloc`, one JavaScript pass otherwise.
 *
 * @since 0.1.0
 * @category finite
 */
export const allFinite = (values: Float32Array): boolean => {
  // The whole vector only: a shorter view would have the check read values past its end.
  const simd = values.byteOffset === 0 ? checks.get(values.buffer) : undefined
  if (simd !== undefined && simd.length === values.length) return simd.check(Math.ceil(values.length / 4) * 16) === 0
  // `x - x` is 0 for a finite x and NaN for NaN or an infinity, and NaN stays in a sum: one add a
  // value and no branch.
  let sum = 0
  for (let i = 0; i < values.length; i++) {
    const value = values[i]!
    sum += value - value
  }
  return sum === 0
}
