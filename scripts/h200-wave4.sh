#!/usr/bin/env bash
# Issue 23's H200 runs in two device calls of at most 10 minutes each (one GPU).
#   KIMI_BENCH_GIT_COMMIT=$(git rev-parse HEAD) bash scripts/h200-wave4.sh OUTDIR 1|2
# Part 1: the 8-rank micro baselines with control rounds (both runtime profiles, shm and
#   pickle, arms eager,deferred,zero-copy) -> OUTDIR/micro/<runtime>/r8-<carrier>; then the
#   gate check on the same machine: a fresh micro r8 (shm, pickle) of the same commit gated
#   with gate-h200 against those runs, and a copy with a 20% slower deferred arm
#   -> OUTDIR/gate-check/{micro,slow-micro,gate.txt,gate-slow.txt}.
# Part 2: deferred-decode micro on photo content (sglang-0.5.23, shm and pickle)
#   -> OUTDIR/decode/micro/sglang-0.5.23/r8-<carrier>-photo; parity on the built-in corpus
#   (deferred-decode included) -> OUTDIR/parity/builtin-k3; serve-ab PR shape at rate inf
#   with the new arm -> OUTDIR/decode/serve-ab/r8-<carrier>.
# Each step is skipped (and says so) once the call's time budget (BUDGET_S, default 540 s)
# would be exceeded by a step of the usual length.
set -u -o pipefail
out=${1:?usage: h200-wave4.sh OUTDIR 1|2}
part=${2:?usage: h200-wave4.sh OUTDIR 1|2}
budget=${BUDGET_S:-540}
kb=(python3 -m kimi_bench.cli.main)
export PYTHONPATH=${PYTHONPATH:-$PWD} PYTHONUNBUFFERED=1
mkdir -p "$out"
status=0
# shellcheck source=lib/budget-step.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib/budget-step.sh"
micro8() {  # micro8 RUNTIME CARRIER ARMS DIR [extra...]
  local rt=$1 t=$2 arms=$3 dir=$4
  shift 4
  "${kb[@]}" micro --synthetic 4x1536x1024 --ranks 8 --transport "$t" --runtime "$rt" \
    --arms "$arms" --repeats 20 --warmup 3 --device cuda --output-dir "$dir" "$@"
}
if [[ $part == 1 ]]; then
  for rt in sglang-0.5.23 pr-33921; do
    for t in shm pickle; do
      step 90 "$out/micro-$rt-$t.log" micro8 "$rt" "$t" eager,deferred,zero-copy \
        "$out/micro/$rt/r8-$t"
    done
  done
  # the gate check on this machine: a fresh run of the same commit against the runs above
  for t in shm pickle; do
    step 90 "$out/fresh-micro-$t.log" micro8 sglang-0.5.23 "$t" eager,deferred,zero-copy \
      "$out/gate-check/micro/r8-$t"
  done
  if [[ -d $out/gate-check/micro ]]; then
    "${kb[@]}" gate "$out/gate-check/micro" --rules gate-h200 --baseline "$out/micro" \
      > "$out/gate-check/gate.txt" 2>&1
    echo "exit code $?" >> "$out/gate-check/gate.txt"
    tail -2 "$out/gate-check/gate.txt"
    python3 scripts/slow_report.py "$out/gate-check/micro/r8-shm/report.json" 0.2 \
      "$out/gate-check/slow-micro"
    "${kb[@]}" gate "$out/gate-check/slow-micro" --rules gate-h200 --baseline "$out/micro" \
      > "$out/gate-check/gate-slow.txt" 2>&1
    echo "exit code $?" >> "$out/gate-check/gate-slow.txt"
    tail -2 "$out/gate-check/gate-slow.txt"
  fi
fi
if [[ $part == 2 ]]; then
  for t in shm pickle; do
    step 100 "$out/decode-micro-$t.log" micro8 sglang-0.5.23 "$t" \
      eager,deferred,zero-copy,deferred-decode "$out/decode/micro/sglang-0.5.23/r8-$t-photo" \
      --content photo
  done
  step 90 "$out/parity.log" "${kb[@]}" parity --device cuda --output-dir "$out/parity/builtin-k3"
  for t in shm pickle; do
    step 120 "$out/decode-serve-$t.log" "${kb[@]}" serve-ab --request-rate inf --ranks 8 \
      --image-resolution 1536x1024 --image-content photo --preset kimi-k3 \
      --arms eager,deferred,zero-copy,deferred-decode --num-prompts 80 --transport "$t" \
      --device cuda --output-dir "$out/decode/serve-ab/r8-$t"
  done
fi
exit $status
