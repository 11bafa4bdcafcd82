import * as Runtime from "../src/platform/detect.ts"

// Printed once per suite run so that `npm test` shows which runtime each pass ran on.
export default function setup(): void {
  console.log(`\n[cohort] test runtime: ${Runtime.describe()}\n`)
}
