#!/usr/bin/env bash
# Issue 42's H200 acceptance of `kimi-bench ab` in one short device call: STREAMS (10)
# calibrations side by side on one H200 host, each one A/A run and one run whose candidate's
# deferred arm does 20% more real work (scripts/revision-ab-calibration.sh, PAIRS=1), so
# 10 + 10 runs fit in about three minutes. The runs share the host's 16 cores and its GPU:
# each run's launches are interleaved A B, B A, ... so what the other streams do hits both
# revisions of a run; every launch records the host load. Small launches (1 rank, one
# 1536x1024 JPEG decoded by the runtime's GPU decoder, 11 repeats) so that a run is mostly
# process start-up; OMP_NUM_THREADS=2 per launch (16 threads each would oversubscribe).
#   KIMI_BENCH_GIT_COMMIT=$(git rev-parse HEAD) bash scripts/h200-revision-ab-streams.sh OUTDIR
# then, here: python3 scripts/revision_ab_summary.py on OUTDIR/all (links to every run).
# DRY=1: the same on a CPU at toy sizes (2 streams), to check the script.
set -u -o pipefail
out=${1:?usage: h200-revision-ab-streams.sh OUTDIR}
streams=${STREAMS:-10}
export PAIRS=1 BUDGET_S=${BUDGET_S:-150} OMP_NUM_THREADS=2
if [[ ${DRY:-0} == 1 ]]; then
  streams=${STREAMS:-2}
  opts=(--device cpu --ranks 1 --synthetic 1x64x64 --repeats 3 --warmup 0)
else
  opts=(--device cuda --ranks 1 --synthetic 1x1536x1024 --repeats 11 --warmup 2)
fi
mkdir -p "$out/all"
uptime > "$out/load-start.txt"
for ((s = 1; s <= streams; s++)); do
  bash scripts/revision-ab-calibration.sh "$out/s$s" "${opts[@]}" --launches "${LAUNCHES:-3}" \
    --max-launches "${MAX_LAUNCHES:-3}" --max-regression 0.10 --timeout 120 \
    > "$out/s$s.log" 2>&1 &
done
wait
uptime > "$out/load-end.txt"
for ((s = 1; s <= streams; s++)); do
  for kind in aa slower; do
    [[ -d $out/s$s/$kind-01 ]] || continue
    ln -sfn "../s$s/$kind-01" "$out/all/$kind-$(printf %02d "$s")"
    ln -sfn "../s$s/$kind-01.log" "$out/all/$kind-$(printf %02d "$s").log"
  done
done
tail -n 3 "$out"/s*.log
