// A bench trainer for the averaging benches: no computation at all, `params` parameters (default
// 407,050, the bundled MLP), each batch nudges them so every round averages fresh values. With
// one batch per round, a run's time is the averaging rounds' time.
//
// `paramsOnly({ samples, params })` builds one with its sizes fixed, for a module written per
// configuration: a module is imported once per process, so sizes read from the environment at
// import would stay those of the first configuration a process ran. The exports below read
// `COHORT_BENCH_SAMPLES` (at import) and `COHORT_BENCH_PARAMS` (per rank, when it starts) for
// benches that run one sample count per process.

/** A trainer module of `samples` samples an epoch whose ranks hold `params` parameters each. */
export const paramsOnly = (sizes: { readonly samples: number; readonly params: number }) => ({
  trainSamples: sizes.samples,
  createTrainer: (context: { readonly rank: number }) => {
    const params = new Float32Array(sizes.params)
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
})

export const trainSamples = Number(process.env["COHORT_BENCH_SAMPLES"] ?? 240)

export const createTrainer = (context: { readonly rank: number }) =>
  paramsOnly({ samples: trainSamples, params: Number(process.env["COHORT_BENCH_PARAMS"] ?? 407_050) }).createTrainer(context)
