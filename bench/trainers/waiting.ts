// A bench trainer that waits 2 ms per batch instead of computing: it stands for a rank whose CPU
// thread mostly waits on an accelerator, so that failover times measure Cohort, not a CPU
// saturated by many busy ranks on a 2-core machine. `COHORT_BENCH_PARAMS` sets its parameter
// count (default 16); the failover bench's ring row gives it the bundled MLP's 407,050.
export const trainSamples = 60_000

export const createTrainer = () => {
  const params = new Float32Array(Number(process.env["COHORT_BENCH_PARAMS"] ?? 16))
  return {
    trainBatch: (indices: Uint32Array) =>
      new Promise<{ loss: number }>((resolve) => setTimeout(() => resolve({ loss: indices.length }), 2)),
    getParams: () => params,
    setParams: (next: Float32Array) => params.set(next),
    save: () => undefined
  }
}
