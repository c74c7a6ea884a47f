#!/usr/bin/env bash
# Calibrate `kimi-bench ab` on this machine: PAIRS A/A runs (one build against itself) and
# PAIRS runs whose candidate's deferred arm does SLOWDOWN more real work (a test build:
# scripts/slower-build.sh, the SlowerArm fault seam), alternated A/A, slower, A/A, ... so the
# host's drift hits both kinds; then the summary (scripts/revision_ab_summary.py).
#   bash scripts/revision-ab-calibration.sh OUTDIR [kimi-bench ab options...]
# Run from the checkout's root. Env: PAIRS (20), SLOWDOWN (0.2), BUDGET_S (1500: no run
# starts when a run as long as the last one would end past it; it says so), KB (the
# kimi-bench command; default `python3 -m kimi_bench.cli.main` with PYTHONPATH=$PWD).
# A run whose report.json exists is not run again: call it again to go on after a budget stop.
set -u -o pipefail
out=${1:?usage: revision-ab-calibration.sh OUTDIR [ab options...]}
shift
pairs=${PAIRS:-20}
slowdown=${SLOWDOWN:-0.2}
budget=${BUDGET_S:-1500}
export PYTHONPATH=${PYTHONPATH:-$PWD} PYTHONUNBUFFERED=1
read -r -a kb <<< "${KB:-python3 -m kimi_bench.cli.main}"
mkdir -p "$out/builds"
bash scripts/slower-build.sh "$out/builds/kimi-bench" 0 "${kb[@]}"
bash scripts/slower-build.sh "$out/builds/kimi-bench-slower" "$slowdown" "${kb[@]}"
uptime > "$out/load-start.txt"
last=0
for ((i = 1; i <= pairs; i++)); do
  for kind in aa slower; do
    name=$kind-$(printf %02d "$i")
    [[ -f $out/$name/report.json ]] && continue
    if (( SECONDS + last > budget )); then
      echo "SKIPPED (time budget ${budget} s): $name" | tee -a "$out/skipped.txt"
      continue
    fi
    cand=$out/builds/kimi-bench
    [[ $kind == slower ]] && cand=$out/builds/kimi-bench-slower
    t0=$SECONDS
    "${kb[@]}" ab --base "$out/builds/kimi-bench" --candidate "$cand" --out "$out/$name" \
      --overwrite "$@" > "$out/$name.log" 2>&1
    rc=$?
    last=$((SECONDS - t0))
    echo "$name: exit $rc in $last s, load $(cut -d' ' -f1 /proc/loadavg): $(tail -1 "$out/$name.log")"
  done
done
uptime > "$out/load-end.txt"
python3 scripts/revision_ab_summary.py "$out" --slowdown "$slowdown" --pairs "$pairs"
