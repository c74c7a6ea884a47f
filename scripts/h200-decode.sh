#!/usr/bin/env bash
# The deferred-decode arm (proposed, not in the runtime) on one H200, for the lead.
# On a CUDA machine, from the repository root (the photos extra installed for --content photo):
#   KIMI_BENCH_GIT_COMMIT=$(git rev-parse HEAD) bash scripts/h200-decode.sh OUTDIR [parts]
# parts: any of "parity micro serve" (default: all). Folders:
#   parity/builtin-k3, parity/builtin-k25     (decode_* columns: bit-exact or routed, why)
#   micro/<runtime>/r8-<carrier>-<content>    (deferred_decode block: bytes and ms against
#                                              deferred and zero-copy, owner_decode_ms)
#   serve-ab/r8-<carrier>                     (ab.<rate>.deferred-decode_vs_deferred/_vs_zero-copy)
# Every arm of a micro run with deferred-decode receives the same encoded images (JPEG q85
# of the generated content), so the other arms decode at their producer: compare these
# micro totals with each other, not with micro runs without the arm.
set -u -o pipefail
out=${1:?usage: h200-decode.sh OUTDIR [parts]}
parts=${2:-"parity micro serve"}
arms=eager,deferred,zero-copy,deferred-decode
kb=(python3 -m kimi_bench.cli.main)
export PYTHONPATH=${PYTHONPATH:-$PWD} PYTHONUNBUFFERED=1
mkdir -p "$out"
status=0
if [[ $parts == *parity* ]]; then
  "${kb[@]}" parity --device cuda --output-dir "$out/parity/builtin-k3" || status=1
  "${kb[@]}" parity --device cuda --preset kimi-k2.5 --output-dir "$out/parity/builtin-k25" \
    || status=1
fi
if [[ $parts == *micro* ]]; then
  for rt in ${RUNTIMES:-sglang-0.5.23 pr-33921}; do
    for t in shm pickle; do
      for c in ${CONTENTS:-photo random}; do
        log="$out/micro-$rt-r8-$t-$c.log"
        "${kb[@]}" micro --synthetic 4x1536x1024 --content "$c" --ranks 8 --transport "$t" \
          --runtime "$rt" --arms "$arms" --repeats "${MICRO_REPEATS:-20}" --warmup 3 \
          --device cuda --output-dir "$out/micro/$rt/r8-$t-$c" > "$log" 2>&1 || status=1
        grep -E "^note: deferred-decode" "$log"
        tail -2 "$log"
      done
    done
  done
fi
if [[ $parts == *serve* ]]; then
  for t in ${SERVE_TRANSPORTS:-shm pickle}; do
    "${kb[@]}" serve-ab --request-rate 2,8,inf --ranks 8 --image-resolution 1536x1024 \
      --image-content photo --preset kimi-k3 --arms "$arms" \
      --num-prompts "${SERVE_REQUESTS:-80}" --transport "$t" --device cuda \
      --output-dir "$out/serve-ab/r8-$t" > "$out/serve-$t.log" 2>&1 || status=1
    tail -3 "$out/serve-$t.log"
  done
fi
exit $status
