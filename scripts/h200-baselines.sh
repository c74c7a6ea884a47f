#!/usr/bin/env bash
# Refresh the committed one-GPU H200 baselines (reports/baselines/h200/...).
# On a CUDA machine, from the repository root:
#   KIMI_BENCH_GIT_COMMIT=$(git rev-parse HEAD) bash scripts/h200-baselines.sh OUTDIR [parts]
# parts: any of "parity micro serve" (default: all). Every run writes its own folder:
#   micro/<runtime>/r<ranks>-<carrier>  (runtime profiles sglang-0.5.23 and pr-33921)
#   serve-ab/r8-<carrier>               (default runtime profile)
# ARMS (default eager,deferred,zero-copy) and SERVE_REQUESTS (default 80) can be set.
set -u -o pipefail
out=${1:?usage: h200-baselines.sh OUTDIR [parts]}
parts=${2:-"parity micro serve"}
arms=${ARMS:-eager,deferred,zero-copy}
kb=(python3 -m kimi_bench.cli.main)
export PYTHONPATH=${PYTHONPATH:-$PWD} PYTHONUNBUFFERED=1
mkdir -p "$out"
status=0
if [[ $parts == *parity* ]]; then
  "${kb[@]}" parity --device cuda --output-dir "$out/parity/builtin-k3" || status=1
  "${kb[@]}" parity --device cuda --preset kimi-k2.5 --output-dir "$out/parity/builtin-k25" \
    || status=1
  "${kb[@]}" parity --device cuda --batch-size 32 --ranks 8 --runtime pr-33921 \
    --output-dir "$out/parity/builtin-k3-batch32-pr" || status=1
fi
if [[ $parts == *micro* ]]; then
  for rt in ${RUNTIMES:-sglang-0.5.23 pr-33921}; do
    for t in shm pickle; do
      for r in ${MICRO_RANKS:-2 4 8}; do
        "${kb[@]}" micro --synthetic 4x1536x1024 --ranks "$r" --transport "$t" --runtime "$rt" \
          --arms "$arms" --repeats "${MICRO_REPEATS:-20}" --warmup 3 --device cuda \
          --output-dir "$out/micro/$rt/r$r-$t" > "$out/micro-$rt-r$r-$t.log" 2>&1 || status=1
        tail -2 "$out/micro-$rt-r$r-$t.log"
      done
    done
  done
fi
if [[ $parts == *serve* ]]; then
  for t in ${SERVE_TRANSPORTS:-shm pickle}; do
    "${kb[@]}" serve-ab --request-rate 2,8,inf --ranks 8 --image-resolution 1536x1024 \
      --preset kimi-k3 --arms "$arms" --num-prompts "${SERVE_REQUESTS:-80}" --transport "$t" \
      --device cuda --output-dir "$out/serve-ab/r8-$t" > "$out/serve-$t.log" 2>&1 || status=1
    tail -3 "$out/serve-$t.log"
  done
fi
exit $status
