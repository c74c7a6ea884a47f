#!/usr/bin/env bash
# The control plane and each arm's payload cost on one H200 (issue 23 item 1): micro with
# the PR shape (4x1536x1024, 8 ranks sharing the GPU, 20 repeats after 3 warm-ups) plus
# control rounds (every arm with 4 x 28x28, one merged token each), per carrier and runtime
# profile. On a CUDA machine, from the repository root:
#   KIMI_BENCH_GIT_COMMIT=$(git rev-parse HEAD) bash scripts/h200-control.sh OUTDIR [runtimes] [carriers]
# runtimes: default "sglang-0.5.23 pr-33921"; carriers: default "shm pickle".
#   OUTDIR/<runtime>/r8-<carrier>/   report.json/md/html, stages.csv, *.png (payload.png)
#   OUTDIR/control.txt               one line per run: totals, control, payload cost, speedups
# About 1-2 minutes per run on an H200 with 16 cores.
set -u -o pipefail
out=${1:?usage: h200-control.sh OUTDIR [runtimes] [carriers]}
runtimes=${2:-"sglang-0.5.23 pr-33921"}
carriers=${3:-"shm pickle"}
kb=(python3 -m kimi_bench.cli.main)
export PYTHONPATH=${PYTHONPATH:-$PWD} PYTHONUNBUFFERED=1
mkdir -p "$out"
status=0
for rt in $runtimes; do
  for t in $carriers; do
    dir="$out/$rt/r8-$t"
    "${kb[@]}" micro --synthetic 4x1536x1024 --ranks 8 --transport "$t" --runtime "$rt" \
      --arms eager,deferred,zero-copy --repeats 20 --warmup 3 --control-repeats 5 \
      --device cuda --output-dir "$dir" > "$out/micro-$rt-$t.log" 2>&1 || status=1
    python3 - "$dir/report.json" "$rt" "$t" >> "$out/control.txt" <<'PY' || status=1
import json, sys
rep = json.load(open(sys.argv[1]))
s, ctl = rep["summary"], rep.get("control") or {}
nan = float("nan")
arms = ", ".join(
    f"{a} {p['total']['arm_ms']:.1f} = control {p['total']['control_ms']:.1f} + payload "
    f"{p['total']['payload_ms']:.1f} ({p['total']['interval']['low'] or nan:.1f}.."
    f"{p['total']['interval']['high'] or nan:.1f})"
    for a, p in (ctl.get("payload") or {}).items()
)
speed = ", ".join(
    f"{k} total {s.get('speedup_' + k.replace('-', '_'), float('nan')):.2f}x payload "
    + (f"{m['median']:.2f}x" if m.get("median") else "n/a")
    for k, m in (ctl.get("payload_speedups") or {}).items()
)
emu = {e["stage"]: {a: round(v, 2) for a, v in e["control_ms"].items() if v is not None}
       for e in ctl.get("emulation_only") or [] if e["kind"] == "emulation_only"}
print(f"{sys.argv[2]} r8-{sys.argv[3]}: {arms}; {speed}; data floor {s.get('floor_ms'):.2f} ms, "
      f"control + data floor {s.get('floor_with_control_ms') or float('nan'):.2f} ms; "
      f"emulation-only (control ms) {emu}")
PY
    tail -1 "$out/control.txt"
  done
done
exit $status
