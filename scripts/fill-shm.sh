#!/bin/sh
# Real fault (root on Linux): child-process ranks averaging through area files, whose /dev/shm
# fills mid-run. In a private mount namespace /dev/shm is a small tmpfs; once the first
# generation's area files exist, dd fills what is left and a rank is SIGKILLed, so the next
# generation cannot make its files (ENOSPC) and must average over the sockets. Prints the run's
# result line (audits) and the ranks' "no ring area file" lines: one per rank and generation.
#
#   sh scripts/fill-shm.sh [node|bun|deno] [size, default 4m]
set -eu
runtime=${1:-node}
size=${2:-4m}
here=$(cd "$(dirname "$0")/.." && pwd)
if [ "$(id -u)" != 0 ]; then echo "fill-shm: needs root (mount, unshare)" >&2; exit 2; fi
if [ "${COHORT_FILL_INSIDE:-}" != 1 ]; then
  exec env COHORT_FILL_INSIDE=1 unshare --mount --propagation private sh "$0" "$runtime" "$size"
fi
mount -t tmpfs -o "size=$size,mode=1777" cohort-fill /dev/shm
out=$(mktemp -d)
case $runtime in
  node) run="node $here/bin/cohort.mjs" ;;
  bun) run="bun --bun $here/bin/cohort.mjs" ;;
  deno) run="deno run -A $here/bin/cohort.mjs" ;;
esac
$run run --trainer "$here/test/fixtures/trainers/wide.ts" --transport process --backend ring --world-size 3 \
  --epochs 4 --no-kill --out "$out" --json > "$out/result.json" 2> "$out/stderr.txt" &
launcher=$!
until ls /dev/shm/cohort-*/area-* > /dev/null 2>&1; do sleep 0.05; done
dd if=/dev/zero of=/dev/shm/filler bs=64k 2> /dev/null || true
# A rank among the launcher's descendants (a runtime's launcher script may stand between).
descendants() { for child in $(ps -o pid= --ppid "$1"); do echo "$child"; descendants "$child"; done; }
rankOf() { for pid in $(descendants "$launcher"); do ps -o pid=,args= -p "$pid"; done | grep -E "rank-entry|rank-process" | head -1 | awk '{print $1}'; }
rank=$(rankOf)
# A quiet machine may end the run before a rank is found or killed: say so, and still print the run.
if [ -n "$rank" ] && kill -KILL "$rank" 2> /dev/null; then
  echo "fill-shm: filled /dev/shm ($(df -h /dev/shm | tail -1 | awk '{print $3 "/" $2}')), SIGKILLed rank process $rank"
else
  echo "fill-shm: filled /dev/shm, but no rank was left to SIGKILL (the run ended first): try again"
fi
wait "$launcher" || echo "fill-shm: the launcher exited with $?"
node -e '
const r = JSON.parse(require("fs").readFileSync(process.argv[1], "utf8"))
console.log("outcome", r.outcome.status, "exit", r.exitCode, "generations", r.ring?.generations, "deaths", r.deaths.map((d) => d.rank + ": " + d.cause).join("; "))
for (const e of r.epochs) console.log("epoch", e.epoch, "committed", e.samplesCommitted, "/", e.epochSamples, "lost", e.lost, "duplicated", e.duplicated)
' "$out/result.json"
grep -h "no ring area file\|could not use" "$out/stderr.txt" "$out"/*/ranks/*/* 2> /dev/null | sort | uniq -c || true
echo "fill-shm: left in /dev/shm: $(ls /dev/shm | grep -v filler | tr '\n' ' ')"
rm -rf "$out"
