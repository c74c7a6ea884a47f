#!/usr/bin/env bash
# A fresh H200 run of this commit, gated with scenarios/gate-h200.toml against the committed
# baselines (issue 21), plus a copy of its micro report with a 20% slower deferred arm that
# the same rules must fail. On a CUDA machine, from the repository root:
#   KIMI_BENCH_GIT_COMMIT=$(git rev-parse HEAD) bash scripts/h200-gate-check.sh OUTDIR [parts]
# parts: any of "micro serve gate" (default: all).
#   OUTDIR/micro/r8-shm, r8-pickle   micro 4x1536x1024, 8 ranks, sglang-0.5.23, 20 repeats
#   OUTDIR/serve-ab/r8-shm, r8-pickle serve-ab PR shape at rate inf (8 ranks, 60 requests)
#   OUTDIR/slow-micro                 micro r8-shm with the deferred arm x1.2 (synthetic)
#   OUTDIR/gate.txt, gate-slow.txt    the two gate outputs (exit codes at the end)
set -u -o pipefail
out=${1:?usage: h200-gate-check.sh OUTDIR [parts]}
parts=${2:-"micro serve gate"}
kb=(python3 -m kimi_bench.cli.main)
export PYTHONPATH=${PYTHONPATH:-$PWD} PYTHONUNBUFFERED=1
mkdir -p "$out"
status=0
if [[ $parts == *micro* ]]; then
  for t in shm pickle; do
    "${kb[@]}" micro --synthetic 4x1536x1024 --ranks 8 --transport "$t" --runtime sglang-0.5.23 \
      --arms eager,deferred,zero-copy --repeats 20 --warmup 3 --device cuda \
      --output-dir "$out/micro/r8-$t" > "$out/micro-r8-$t.log" 2>&1 || status=1
    tail -2 "$out/micro-r8-$t.log"
  done
fi
if [[ $parts == *serve* ]]; then
  for t in shm pickle; do
    "${kb[@]}" serve-ab --request-rate inf --ranks 8 --image-resolution width=1536,height=1024 \
      --preset kimi-k3 --arms eager,deferred --num-prompts 60 --transport "$t" --device cuda \
      --output-dir "$out/serve-ab/r8-$t" > "$out/serve-$t.log" 2>&1 || status=1
    tail -3 "$out/serve-$t.log"
  done
fi
if [[ $parts == *gate* ]]; then
  "${kb[@]}" gate "$out/micro" "$out/serve-ab" --rules gate-h200 \
    --baseline reports/baselines/h200 > "$out/gate.txt" 2>&1
  echo "exit code $?" >> "$out/gate.txt"
  tail -2 "$out/gate.txt"
  python3 scripts/slow_report.py "$out/micro/r8-shm/report.json" 0.2 "$out/slow-micro"
  "${kb[@]}" gate "$out/slow-micro" --rules gate-h200 --baseline reports/baselines/h200 \
    > "$out/gate-slow.txt" 2>&1
  echo "exit code $?" >> "$out/gate-slow.txt"
  tail -2 "$out/gate-slow.txt"
fi
exit $status
