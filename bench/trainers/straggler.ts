// A bench trainer that waits 2 ms per batch instead of computing, as `waiting.ts`, except one rank:
// `COHORT_BENCH_SLOW=RANK:MS` makes rank RANK wait MS ms per batch (a straggler: a lossy or slow
// link, a busy host). 24,000 samples, 16 parameters.
export const trainSamples = 24_000

export const createTrainer = (context: { readonly rank: number }) => {
  const params = new Float32Array(16)
  const [slowRank, slowMs] = (process.env["COHORT_BENCH_SLOW"] ?? "").split(":").map(Number)
  const waitMs = context.rank === slowRank && Number.isFinite(slowMs) ? slowMs! : 2
  return {
    trainBatch: (indices: Uint32Array) =>
      new Promise<{ loss: number }>((resolve) => setTimeout(() => resolve({ loss: indices.length }), waitMs)),
    getParams: () => params,
    setParams: (next: Float32Array) => params.set(next),
    save: () => undefined
  }
}
