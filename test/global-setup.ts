import * as Runtime from "../src/platform/detect.ts"

// Printed once per suite run so that each pass of `npm run test:all` shows which runtime it ran on.
export default function setup(): void {
  console.log(`\n[cohort] test runtime: ${Runtime.describe()}\n`)
}
