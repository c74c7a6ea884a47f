#!/bin/bash
# The out-of-sample calibration of reports/calibration/h200-cross/ (see its README):
# thresholds chosen on machine D's A/A pairs (--runs), scored on pairs with runs of
# machines B, C, E and X2 (--holdout). Run from the repository root:
#   scripts/calibrate-h200-cross.sh scenarios/gate-h200.toml reports/calibration/h200-cross/gate-h200
#   scripts/calibrate-h200-cross.sh reports/calibration/h200-cross/study-rules.toml reports/calibration/h200-cross/study
set -euo pipefail
rules=$1
out=$2
M=reports/calibration/h200-cross/machines
exec kimi-bench calibrate --rules "$rules" --output-dir "$out" \
  --runs $M/d-eefb461/baseline-sglang-0.5.23-r8-shm --runs reports/gate-check/h200-wave4/micro/r8-shm \
  --runs $M/d-eefb461/baseline-sglang-0.5.23-r8-pickle --runs reports/gate-check/h200-wave4/micro/r8-pickle \
  --runs $M/d-eefb461/baseline-pr-33921-r8-shm --runs $M/d-eefb461/baseline-pr-33921-r8-pickle \
  --runs reports/baselines/h200/deferred-decode/micro/sglang-0.5.23 \
  --holdout B=$M/b-c073b2e \
  --holdout C=reports/gate-check/h200/micro \
  --holdout E=reports/baselines/h200/micro \
  --holdout E=reports/baselines/h200/deferred-decode/micro/pr-33921 \
  --holdout X2=reports/baselines/h200x2/micro/r2-1gpu
