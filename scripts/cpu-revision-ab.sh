#!/usr/bin/env bash
# Issue 42's CPU acceptance of `kimi-bench ab` on the 2-core CI machine: 20 A/A runs and 20
# runs whose candidate's deferred arm is 20% slower (scripts/revision-ab-calibration.sh),
# each micro launch small (1 rank, 1x512x384, 21 repeats) so that a launch is mostly start-up.
#   bash scripts/cpu-revision-ab.sh OUTDIR [ab options...]   (from the checkout's root; nohup it)
# Env as revision-ab-calibration.sh (PAIRS, BUDGET_S, LAUNCHES: launches per revision, 3).
set -u -o pipefail
out=${1:?usage: cpu-revision-ab.sh OUTDIR}
exec bash scripts/revision-ab-calibration.sh "$out" --device cpu --ranks 1 \
  --synthetic 1x512x384 --repeats 21 --warmup 2 --launches "${LAUNCHES:-3}" \
  --max-regression 0.10 "${@:2}"
