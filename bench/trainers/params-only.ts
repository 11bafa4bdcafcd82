// A bench trainer for the averaging bench: no computation at all, `COHORT_BENCH_PARAMS` parameters
// (default 407,050, the bundled MLP), each batch nudges them so every round averages fresh
// values. With one batch per round, a run's time is the averaging rounds' time.
export const trainSamples = Number(process.env["COHORT_BENCH_SAMPLES"] ?? 240)

export const createTrainer = (context: { readonly rank: number }) => {
  const params = new Float32Array(Number(process.env["COHORT_BENCH_PARAMS"] ?? 407_050))
  return {
    trainBatch: (indices: Uint32Array) => {
      params[indices[0]! % params.length] = context.rank + indices.length
      return { loss: 0 }
    },
    getParams: () => params,
    setParams: (next: Float32Array) => params.set(next),
    save: () => undefined
  }
}
