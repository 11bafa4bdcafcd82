/**
 * Cohort's building blocks: the coordinator core (a deterministic state machine), the wire codec,
 * the cpu averaging backend and the ring all-reduce collective, the seeded permutation and the runtime detector. Most users want the
 * package's main entry (`actors/index.ts`), whose `run` trains a whole cluster.
 *
 * @since 0.1.0
 */
export * as Alerts from "./core/alerts.ts"
export * as Audit from "./core/audit.ts"
export * as ChunkPool from "./core/chunk-pool.ts"
export * as Config from "./core/config.ts"
export * as Coordinator from "./core/coordinator.ts"
export * as Membership from "./core/membership.ts"
export type * as Messages from "./core/messages.ts"
export * as Split from "./core/split.ts"
export * as Cpu from "./averaging/cpu.ts"
export * as Ring from "./averaging/ring.ts"
export * as Permutation from "./train/permutation.ts"
export * as Trainer from "./train/trainer.ts"
export * as Runtime from "./platform/detect.ts"
export * as Codec from "./wire/codec.ts"
export * as WireError from "./wire/wire-error.ts"
