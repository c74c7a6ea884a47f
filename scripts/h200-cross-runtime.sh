#!/usr/bin/env bash
# Issue 47 on one H200: micro at 8 ranks, 4x1536x1024, 20 repeats after 3 warm-ups, with
# 5 control rounds (4 x 28x28 per arm), under each runtime profile, in one device call:
#   KIMI_BENCH_GIT_COMMIT=$(git rev-parse HEAD) bash scripts/h200-cross-runtime.sh OUTDIR
#   OUTDIR/sglang-0.5.23/r8-shm, OUTDIR/pr-33921/r8-shm   eager, deferred, deferred-decode
#   OUTDIR/vllm-0.33/r8-vllm-mq                           vllm-uint8, encoder TP "weights"
#   OUTDIR/vllm-0.33-data/r8-vllm-mq                      the same, --encoder-tp-mode data
# The vLLM runs' control rounds go through the vllm-mq carrier (the MessageQueue ring below
# 16 MiB): the ring's control cost at 8 ranks beside the SGLang carriers'.
# DRY=1: the same steps at toy sizes on a CPU (2 ranks, 4x96x64, 2 repeats). A step whose
# usual length would end past BUDGET_S (default 400 s) is skipped and named in skipped.txt.
set -u -o pipefail
out=${1:?usage: h200-cross-runtime.sh OUTDIR}
budget=${BUDGET_S:-400}
kb=(python3 -m kimi_bench.cli.main)
export PYTHONPATH=${PYTHONPATH:-$PWD} PYTHONUNBUFFERED=1
if [[ ${DRY:-0} == 1 ]]; then
  common=(--synthetic 4x96x64 --ranks 2 --repeats 2 --warmup 0 --control-repeats 2 --device cpu)
  ranks=2 need=0
else
  common=(--synthetic 4x1536x1024 --ranks 8 --repeats 20 --warmup 3 --control-repeats 5
    --device cuda)
  ranks=8 need=1
fi
mkdir -p "$out"
status=0
step_scale=$need
# shellcheck source=lib/budget-step.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib/budget-step.sh"
for rt in sglang-0.5.23 pr-33921; do
  step 80 "$out/micro-$rt.log" "${kb[@]}" micro "${common[@]}" --runtime "$rt" \
    --transport shm --arms eager,deferred,deferred-decode --output-dir "$out/$rt/r$ranks-shm"
done
step 70 "$out/micro-vllm-0.33.log" "${kb[@]}" micro "${common[@]}" --runtime vllm-0.33 \
  --output-dir "$out/vllm-0.33/r$ranks-vllm-mq"
step 70 "$out/micro-vllm-0.33-data.log" "${kb[@]}" micro "${common[@]}" --runtime vllm-0.33 \
  --encoder-tp-mode data --output-dir "$out/vllm-0.33-data/r$ranks-vllm-mq"
exit $status
