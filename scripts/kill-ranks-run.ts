// The run scripts/kill-ranks.mjs starts with `--area-mb N`: the process ring of the drifting
// trainer through the launcher's API (the CLI has no option for the area files' bound;
// `ringAreaMemoryMb: 0` keeps every round on the sockets). Prints the run's result as one JSON line.
import * as Launcher from "../actors/launcher/launcher.ts"

const [outDir, trainer, worldSize, areaMb, epochs] = process.argv.slice(2)
const result = await Launcher.run({
  outDir: outDir!,
  trainer: trainer!,
  backend: "ring",
  transport: "process",
  worldSize: Number(worldSize),
  epochs: Number(epochs),
  ringAreaMemoryMb: Number(areaMb)
})
console.log(JSON.stringify(result))
process.exit(0)
