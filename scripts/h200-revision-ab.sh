#!/usr/bin/env bash
# Issue 42's H200 acceptance of `kimi-bench ab` (same-machine A/B of two revisions): 10 A/A
# runs and 10 runs whose candidate's deferred arm is 20% slower (a test build through the
# SlowerArm fault seam), micro at 8 ranks 4x1536x1024 on CUDA, 3 launches per revision.
#   KIMI_BENCH_GIT_COMMIT=$(git rev-parse HEAD) bash scripts/h200-revision-ab.sh OUTDIR
# (more `kimi-bench ab` options after OUTDIR override these: the dry run on a CPU was
#   PAIRS=1 bash scripts/h200-revision-ab.sh /tmp/dry --device cpu --ranks 2 --synthetic 1x64x64
#   --repeats 2 --launches 2)
# Run from the repo root (nothing pip-installed: PYTHONPATH=$PWD). Within one call it starts
# no run that would end past BUDGET_S (default 450 s) and says so in OUTDIR/skipped.txt; a
# run already in OUTDIR is kept, so calling it again goes on where it stopped. OUTDIR/summary.md
# and summary.json are rewritten after each call.
set -u -o pipefail
out=${1:?usage: h200-revision-ab.sh OUTDIR}
export PAIRS=${PAIRS:-10} BUDGET_S=${BUDGET_S:-450}
exec bash scripts/revision-ab-calibration.sh "$out" --device cuda --ranks 8 \
  --synthetic 4x1536x1024 --repeats "${REPEATS:-6}" --warmup 2 --launches "${LAUNCHES:-3}" \
  --max-regression 0.10 --timeout 300 "${@:2}"
