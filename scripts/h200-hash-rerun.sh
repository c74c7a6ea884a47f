#!/usr/bin/env bash
# Issue 44: the headline runs again with the producer's feature hash in (and sglang-0.5.23's
# preprocess cache on, its default, on first-sight images), on one H200 in one device call
# of about four minutes:
#   KIMI_BENCH_GIT_COMMIT=$(git rev-parse HEAD) bash scripts/h200-hash-rerun.sh OUTDIR
# 1. micro at 8 ranks, 4x1536x1024, shm, eager+deferred, 20 repeats after 3 warm-ups, for
#    each runtime profile -> OUTDIR/micro/<runtime>/r8-shm (summary.hash_and_cache: the hash's
#    bytes and passes per arm; the hash stage's time in the stage table)
# 2. serve-ab PR shape (8 ranks, 2 processor workers, K3, 1536x1024 JPEG) at rate inf, shm,
#    sglang-0.5.23, 60 requests, every payload distinct (--unique-images 120: no cache hit
#    from cycled payloads) -> OUTDIR/serve-ab/sglang-0.5.23/r8-shm
# 3. micro as 1. with half of the images repeated (--repeat-share 0.5), sglang-0.5.23
#    -> OUTDIR/micro-repeats/sglang-0.5.23/r8-shm (the cache's hits on a GPU)
# DRY=1 runs the same steps at toy sizes on the CPU (2 ranks, 96x64, 2 repeats) to check the
# script. A step is skipped (and says so) once the call's budget (BUDGET_S, default 230 s)
# would be exceeded by a step of its usual length.
set -u -o pipefail
out=${1:?usage: h200-hash-rerun.sh OUTDIR}
budget=${BUDGET_S:-230}
kb=(python3 -m kimi_bench.cli.main)
export PYTHONPATH=${PYTHONPATH:-$PWD} PYTHONUNBUFFERED=1
if [[ ${DRY:-0} == 1 ]]; then
  size=4x96x64 res=96x64 ranks=2 reps=(--repeats 2 --warmup 0) dev=cpu requests=6 need=0
else
  size=4x1536x1024 res=1536x1024 ranks=8 reps=(--repeats 20 --warmup 3) dev=cuda requests=60
  need=1
fi
mkdir -p "$out"
status=0
step_scale=$need
# shellcheck source=lib/budget-step.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib/budget-step.sh"
micro() {  # micro RUNTIME DIR [extra...]
  local rt=$1 dir=$2
  shift 2
  "${kb[@]}" micro --synthetic "$size" --ranks "$ranks" --transport shm --runtime "$rt" \
    --arms eager,deferred "${reps[@]}" --device "$dev" --output-dir "$dir" "$@"
}
for rt in sglang-0.5.23 pr-33921; do
  step 70 "$out/micro-$rt.log" micro "$rt" "$out/micro/$rt/r$ranks-shm"
done
step 80 "$out/serve-sglang-0.5.23.log" "${kb[@]}" serve-ab --request-rate inf \
  --ranks "$ranks" --processor-workers 2 --image-resolution "$res" --preset kimi-k3 \
  --runtime sglang-0.5.23 --arms eager,deferred --num-prompts "$requests" \
  --unique-images 120 --transport shm --device "$dev" \
  --output-dir "$out/serve-ab/sglang-0.5.23/r$ranks-shm"
step 70 "$out/micro-repeats.log" micro sglang-0.5.23 \
  "$out/micro-repeats/sglang-0.5.23/r$ranks-shm" --repeat-share 0.5
for f in "$out"/micro*/*/*/report.json; do  # the hash and the cache per arm, one line each
  [[ -f $f ]] && python3 -c 'import json,sys
r = json.load(open(sys.argv[1]))
for arm, c in (r["summary"].get("hash_and_cache") or {}).items():
    print(sys.argv[1], arm, c)' "$f"
done
exit $status
