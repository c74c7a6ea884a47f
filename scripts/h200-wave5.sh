#!/usr/bin/env bash
# Issue 23's projection data and the pr-33921 deferred-decode runs on one H200, in three
# device calls of at most 10 minutes each:
#   KIMI_BENCH_GIT_COMMIT=$(git rev-parse HEAD) bash scripts/h200-wave5.sh OUTDIR PART
# PART sglang-0.5.23 | pr-33921: micro at 2, 4 and 8 ranks (4x1536x1024, arms
#   eager,deferred,zero-copy, control rounds, 20 repeats) for shm and pickle, all on the one
#   machine of this call, so the projection is calibrated and checked on one host
#   -> OUTDIR/micro/<runtime>/r<N>-<carrier>; then a copy of each 8-rank run whose deferred
#   arm is 20% slower (scripts/slow_report.py) -> OUTDIR/slow/<runtime>/r8-<carrier>.
# PART decode: deferred-decode with the pr-33921 profile: micro r8 on photo content
#   -> OUTDIR/decode/micro/pr-33921/r8-<carrier>-photo; serve-ab PR shape at rate inf
#   -> OUTDIR/decode/serve-ab/pr-33921/r8-<carrier>.
# A step is skipped (and says so) once the call's budget (BUDGET_S, default 560 s) would be
# exceeded by a step of its usual length.
set -u -o pipefail
out=${1:?usage: h200-wave5.sh OUTDIR PART}
part=${2:?usage: h200-wave5.sh OUTDIR PART}
budget=${BUDGET_S:-560}
kb=(python3 -m kimi_bench.cli.main)
export PYTHONPATH=${PYTHONPATH:-$PWD} PYTHONUNBUFFERED=1
mkdir -p "$out"
status=0
# shellcheck source=lib/budget-step.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib/budget-step.sh"
micro() {  # micro RUNTIME CARRIER RANKS ARMS DIR [extra...]
  local rt=$1 t=$2 r=$3 arms=$4 dir=$5
  shift 5
  "${kb[@]}" micro --synthetic 4x1536x1024 --ranks "$r" --transport "$t" --runtime "$rt" \
    --arms "$arms" --repeats 20 --warmup 3 --device cuda --output-dir "$dir" "$@"
}
case $part in
  sglang-0.5.23|pr-33921)
    for r in 2 4 8; do
      for t in shm pickle; do
        step $((30 + 10 * r)) "$out/micro-$part-r$r-$t.log" micro "$part" "$t" "$r" \
          eager,deferred,zero-copy "$out/micro/$part/r$r-$t"
      done
    done
    for t in shm pickle; do
      if [[ -f $out/micro/$part/r8-$t/report.json ]]; then
        python3 scripts/slow_report.py "$out/micro/$part/r8-$t/report.json" 0.2 \
          "$out/slow/$part/r8-$t" > "$out/slow-$part-$t.log" 2>&1 || status=1
      fi
    done
    ;;
  decode)
    for t in shm pickle; do
      step 100 "$out/decode-micro-$t.log" micro pr-33921 "$t" 8 \
        eager,deferred,zero-copy,deferred-decode "$out/decode/micro/pr-33921/r8-$t-photo" \
        --content photo
    done
    for t in shm pickle; do
      step 120 "$out/decode-serve-$t.log" "${kb[@]}" serve-ab --request-rate inf --ranks 8 \
        --image-resolution 1536x1024 --image-content photo --preset kimi-k3 \
        --runtime pr-33921 --arms eager,deferred,zero-copy,deferred-decode --num-prompts 80 \
        --transport "$t" --device cuda --output-dir "$out/decode/serve-ab/pr-33921/r8-$t"
    done
    ;;
  *) echo "unknown part $part" >&2; exit 2 ;;
esac
exit $status
