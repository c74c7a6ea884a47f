#!/usr/bin/env bash
# Issue 43 on one H200: serve-ab with the PR's setup (8 ranks, kimi-k3, shm, photo content)
# but a mixed workload (1-4 JPEG photos of 256-2048 px a request, seeded), both runtime
# profiles, then the capacity of eager vs deferred vs deferred-decode under a TTFT SLO;
# about 4 minutes in one device call:
#   KIMI_BENCH_GIT_COMMIT=$(git rev-parse HEAD) bash scripts/h200-mixed-serve.sh OUTDIR
# -> OUTDIR/mixed/<runtime>   serve-ab eager,deferred,deferred-decode at RATES
#    OUTDIR/capacity/pr-33921 serve-ab --capacity (bisection CAP_MIN..CAP_MAX req/s to
#                             CAP_RES, --goodput CAP_SLO), each arm's capacity and the gain
# Every size is an environment variable, so the same script dry-runs on a CPU at tiny sizes:
#   DEVICE=cpu RANKS=2 REQUESTS=6 CAP_REQUESTS=4 SIZES=random:64x64-256x256 RATES=inf \
#     CAP_MIN=1 CAP_MAX=4 CAP_RES=0.5 CAP_SLO=ttft:20000 bash scripts/h200-mixed-serve.sh OUT
# A step is skipped (and says so) once the call's budget (BUDGET_S, default 560 s) would be
# exceeded by a step of its usual length. REPEAT_SHARE=S passes --repeat-share S (0: every
# image of a trace distinct; unset: --unique-images payloads in turn, as the committed
# run, where sglang-0.5.23's preprocess cache hits most images).
set -u -o pipefail
out=${1:?usage: h200-mixed-serve.sh OUTDIR}
budget=${BUDGET_S:-560}
device=${DEVICE:-cuda}
ranks=${RANKS:-8}
requests=${REQUESTS:-64}
rates=${RATES:-8,inf}
sizes=${SIZES:-random:256x256-2048x2048}
cap_requests=${CAP_REQUESTS:-48}
cap_min=${CAP_MIN:-4}
cap_max=${CAP_MAX:-256}
cap_res=${CAP_RES:-0.15}
cap_slo=${CAP_SLO:-ttft:1000}
kb=(python3 -m kimi_bench.cli.main)
export PYTHONPATH=${PYTHONPATH:-$PWD} PYTHONUNBUFFERED=1
mkdir -p "$out"
status=0
# shellcheck source=lib/budget-step.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib/budget-step.sh"
mixed=(--image-sizes "$sizes" --images-per-request 1-4 --image-format jpeg
       --image-content photo --preset kimi-k3 --transport shm --ranks "$ranks"
       --device "$device" --seed 0)
[[ -n ${REPEAT_SHARE:-} ]] && mixed+=(--repeat-share "$REPEAT_SHARE")
for rt in sglang-0.5.23 pr-33921; do
  step 60 "$out/mixed-$rt.log" "${kb[@]}" serve-ab "${mixed[@]}" --runtime "$rt" \
    --arms eager,deferred,deferred-decode --request-rate "$rates" --num-prompts "$requests" \
    --output-dir "$out/mixed/$rt"
done
step 120 "$out/capacity.log" "${kb[@]}" serve-ab "${mixed[@]}" --runtime pr-33921 \
  --arms eager,deferred,deferred-decode --capacity --goodput "$cap_slo" \
  --capacity-min-rate "$cap_min" --capacity-max-rate "$cap_max" \
  --capacity-resolution "$cap_res" --num-prompts "$cap_requests" \
  --output-dir "$out/capacity/pr-33921"
grep -h "^note: capacity" "$out/capacity.log" 2>/dev/null || true
exit $status
