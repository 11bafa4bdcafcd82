/**
 * Whether a float32 vector is all finite, fast: every ring rank asks it of its whole model each
 * round (`Ring.isContribution`), and in plain JavaScript the check cost about as much as the
 * rank's share of the reduction itself (one add per value in a dependent chain). A vector made by
 * `alloc` lives in a WebAssembly memory of its own, where a SIMD loop checks four values an
 * instruction; any other vector, or a runtime without WebAssembly SIMD, takes the JavaScript loop.
 * Both give the same answer: false when any value is NaN or an infinity.
 *
 * The module (hand-assembled below, about 100 bytes) imports its memory and exports
 * `check(atBytes, endBytes) -> i32`: 1 when some float32 in bytes [atBytes, endBytes) has an
 * exponent of all ones (NaN or an infinity), else 0. For an `alloc` vector `endBytes` is the
 * vector's bytes rounded up to 16; the padding past the vector stays zero (nothing writes there),
 * so it is finite. A shared memory (`sharedMemory`, `share`: the shared all-reduce's area, where a
 * rank writes its contribution) gets the same check compiled for a shared import, over any view
 * in it.
 *
 * @since 0.1.0
 */

import { section, u32 } from "./wasm-bytes.ts"

/** 0x7f800000 in each of four little-endian i32 lanes: a float32's exponent bits. */
const exponentMask = [0x00, 0x00, 0x80, 0x7f, 0x00, 0x00, 0x80, 0x7f, 0x00, 0x00, 0x80, 0x7f, 0x00, 0x00, 0x80, 0x7f]

/**
 * The module; `shared`: it imports a shared memory (`share`) instead of one of its own (a module
 * must declare which, and 65,536 pages, 4 GiB, as the largest it accepts).
 */
const moduleBytes = (shared: boolean): Uint8Array => {
  // Locals: 0 = at, 1 = endBytes (params), 2 = seen (v128).
  const body = [
    ...[0x01, 0x01, 0x7b], // locals: one v128
    ...[0x02, 0x40], // block
    ...[0x03, 0x40], //   loop
    ...[0x20, 0x00, 0x20, 0x01, 0x4f, 0x0d, 0x01], //     if at >= endBytes: leave the block
    ...[0x20, 0x02], //     seen
    ...[0x20, 0x00, 0xfd, 0x00, 0x02, 0x00], //     v128.load at (align 4, offset 0)
    ...[0xfd, 0x0c, ...exponentMask, 0xfd, 0x4e], //     and mask
    ...[0xfd, 0x0c, ...exponentMask, 0xfd, 0x37], //     i32x4.eq mask: all ones where not finite
    ...[0xfd, 0x50, 0x21, 0x02], //     seen |= that
    ...[0x20, 0x00, 0x41, 0x10, 0x6a, 0x21, 0x00], //     at += 16
    ...[0x0c, 0x00], //     again
    ...[0x0b, 0x0b], //   end loop, end block
    ...[0x20, 0x02, 0xfd, 0x53], // v128.any_true seen
    0x0b
  ]
  // Memory limits: at least 1 page; shared, also at most 65,536.
  const limits = shared ? [0x03, 0x01, ...u32(65_536)] : [0x00, 0x01]
  return Uint8Array.from([
    ...[0x00, 0x61, 0x73, 0x6d, 0x01, 0x00, 0x00, 0x00],
    ...section(1, [0x01, 0x60, 0x02, 0x7f, 0x7f, 0x01, 0x7f]), // type 0: (i32, i32) -> i32
    ...section(2, [0x01, 0x01, 0x6d, 0x03, 0x6d, 0x65, 0x6d, 0x02, ...limits]), // import "m" "mem": memory
    ...section(3, [0x01, 0x00]), // function 0 has type 0
    ...section(7, [0x01, 0x05, 0x63, 0x68, 0x65, 0x63, 0x6b, 0x00, 0x00]), // export "check" = function 0
    ...section(10, [0x01, ...u32(body.length), ...body])
  ])
}

interface Wasm {
  readonly Module: new (bytes: Uint8Array) => object
  readonly Instance: new (module: object, imports: object) => { readonly exports: Record<string, unknown> }
  readonly Memory: new (descriptor: {
    readonly initial: number
    readonly maximum?: number
    readonly shared?: boolean
  }) => { readonly buffer: ArrayBuffer }
}

/** The compiled modules, or undefined where WebAssembly or its SIMD is missing (then JavaScript checks). */
const compiled: { readonly wasm: Wasm; readonly module: object; readonly sharedModule: object | undefined } | undefined = (() => {
  const wasm = (globalThis as { readonly WebAssembly?: Wasm }).WebAssembly
  if (wasm === undefined) return undefined
  try {
    const module = new wasm.Module(moduleBytes(false))
    let sharedModule: object | undefined
    try {
      sharedModule = new wasm.Module(moduleBytes(true))
    } catch {
      sharedModule = undefined
    }
    return { wasm, module, sharedModule }
  } catch {
    return undefined
  }
})()

/**
 * The SIMD check of each buffer `alloc` or `sharedMemory` made or `share` was given: `length`, the
 * one vector of an `alloc` buffer; undefined for a shared memory, where any view is checked.
 */
const checks = new WeakMap<ArrayBufferLike, { readonly check: (atBytes: number, endBytes: number) => number; readonly length?: number }>()

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
  checks.set(memory.buffer, { check: instance.exports["check"] as (atBytes: number, endBytes: number) => number, length })
  return new Float32Array(memory.buffer, 0, length)
}

/**
 * A shared WebAssembly memory (a `WebAssembly.Memory` made with `shared: true`): its `buffer` is a
 * `SharedArrayBuffer`; the memory itself can be posted to another thread, which `share`s it.
 *
 * @since 0.1.0
 * @category model
 */
export interface SharedMemory {
  readonly buffer: SharedArrayBuffer
}

/**
 * A zeroed shared memory of at least `bytes` bytes (whole 64 KiB pages, at most 4 GiB) whose
 * float32 views `allFinite` checks with SIMD wherever they start (`share`), or undefined where
 * shared WebAssembly memory or SIMD is missing.
 *
 * @since 0.1.0
 * @category finite
 */
export const sharedMemory = (bytes: number): SharedMemory | undefined => {
  if (compiled?.sharedModule === undefined) return undefined
  const pages = Math.max(1, Math.ceil(bytes / pageBytes))
  if (pages > 65_536) return undefined
  const memory = new compiled.wasm.Memory({ initial: pages, maximum: pages, shared: true }) as unknown as SharedMemory
  return share(memory) === undefined ? undefined : memory
}

/**
 * Makes `allFinite` check the views in `memory` (from `sharedMemory`, in this thread or posted
 * from another) with SIMD; gives its buffer, the one those views must be made on, or undefined
 * where this runtime cannot run the check over it (then `allFinite` takes the JavaScript loop).
 *
 * @since 0.1.0
 * @category finite
 */
export const share = (memory: SharedMemory): SharedArrayBuffer | undefined => {
  if (compiled?.sharedModule === undefined) return undefined
  const buffer = memory.buffer
  if (checks.has(buffer)) return buffer
  try {
    const instance = new compiled.wasm.Instance(compiled.sharedModule, { m: { mem: memory } })
    checks.set(buffer, { check: instance.exports["check"] as (atBytes: number, endBytes: number) => number })
    return buffer
  } catch {
    return undefined
  }
}

/**
 * Whether every value of `values` is finite (no NaN, no infinity). SIMD for any view of a vector
 * from `alloc` and for any view in a shared memory (`share`), one JavaScript pass otherwise.
 *
 * @since 0.1.0
 * @category finite
 */
export const allFinite = (values: Float32Array): boolean => {
  const simd = checks.get(values.buffer)
  if (simd === undefined) return finiteLoop(values, 0)
  // A whole `alloc` vector: its zero padding makes the last group of four whole.
  if (simd.length === values.length && values.byteOffset === 0) return simd.check(0, Math.ceil(values.length / 4) * 16) === 0
  // Any other view (part of an `alloc` vector, or in a shared memory, where the values past the
  // view are someone else's): SIMD over its whole groups of four, then the rest here.
  const whole = values.length - (values.length % 4)
  if (simd.check(values.byteOffset, values.byteOffset + 4 * whole) !== 0) return false
  return finiteLoop(values, whole)
}

/**
 * Whether `allFinite` checks `values` with SIMD (it lies in a buffer `alloc`, `sharedMemory` or
 * `share` registered).
 *
 * @since 0.1.0
 * @category finite
 */
export const isFast = (values: Float32Array): boolean => checks.has(values.buffer)

/** Whether `values[from..]` are all finite, in JavaScript. */
const finiteLoop = (values: Float32Array, from: number): boolean => {
  // `x - x` is 0 for a finite x and NaN for NaN or an infinity, and NaN stays in a sum: one add a
  // value and no branch.
  let sum = 0
  for (let i = from; i < values.length; i++) {
    const value = values[i]!
    sum += value - value
  }
  return sum === 0
}
