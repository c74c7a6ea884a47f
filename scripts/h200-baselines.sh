#!/usr/bin/env bash
# Refresh the committed H200 baselines (reports/baselines/h200/...).
# Usage on a CUDA machine, from the repository root:
#   KIMI_BENCH_GIT_COMMIT=$(git rev-parse HEAD) bash scripts/h200-baselines.sh OUTDIR [parts]
# parts: any of "parity micro serve" (default: all). Every run writes its own folder.
set -u -o pipefail
out=${1:?usage: h200-baselines.sh OUTDIR [parts]}
parts=${2:-"parity micro serve"}
kb=(python3 -m kimi_bench.cli.main)
export PYTHONPATH=${PYTHONPATH:-$PWD} PYTHONUNBUFFERED=1
mkdir -p "$out"
MICRO_NOTE=${MICRO_NOTE:-"Issue target: deferred >= 10x faster than eager at 8 ranks (the PR \
reported 12.76x for 4 x 1536x1024). On this one-GPU host the measured speedup is lower; the \
'where ... time goes' notes show why: the deferred arm still pushes the raw uint8 bytes \
through the same host path as eager (PIL->CHW staging, shm copy-in or pickling, one clone \
per rank or a gloo broadcast), which costs about a quarter of eager's host copies, so the \
ratio is bounded near the 4x byte ratio plus eager-only D2H and pre-embed moves. The eager \
arm was not slowed: it is the same code path minus the deferral. Which span the PR timed \
is not stated in SPEC; all 8 ranks here share one GPU and one PCIe link."}
SERVE_NOTE=${SERVE_NOTE:-"Issue expectation: deferred wins clearly at inf (PR: +248% throughput, \
-78.7% median TTFT) and is roughly neutral at rate 2. At low rates TTFT is the sum of the \
per-request stages listed in the 'rate ...' notes; the PR's first token waits on Kimi-K3's \
real prefill on 8 GPUs, which hides producer-side and transport differences that the small \
stand-in prefill here does not, so a gap at rate 2 points at those stages, not at noise."}
status=0
if [[ $parts == *parity* ]]; then
  "${kb[@]}" parity --device cuda --out "$out/parity/builtin-k3" || status=1
  "${kb[@]}" parity --device cuda --preset kimi-k2.5 --out "$out/parity/builtin-k25" || status=1
  "${kb[@]}" parity --device cuda --batch-size 32 --ranks 8 --policy image \
    --out "$out/parity/builtin-k3-batch32-image" || status=1
fi
if [[ $parts == *micro* ]]; then
  for t in shm pickle; do
    for r in 2 4 8; do
      "${kb[@]}" micro --images 4x1536x1024 --ranks "$r" --transport "$t" --repeats 20 \
        --warmup 3 --device cuda --note "$MICRO_NOTE" --out "$out/micro/r$r-$t" || status=1
    done
  done
fi
if [[ $parts == *serve* ]]; then
  for t in ${SERVE_TRANSPORTS:-shm pickle}; do
    "${kb[@]}" serve-ab --rates 2,8,inf --ranks 8 --resolution 1536x1024 --preset kimi-k3 \
      --requests "${SERVE_REQUESTS:-80}" --transport "$t" --device cuda --note "$SERVE_NOTE" \
      --out "$out/serve-ab/r8-$t" || status=1
  done
fi
exit $status
