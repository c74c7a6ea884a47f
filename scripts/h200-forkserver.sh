#!/usr/bin/env bash
# Workers forked from a forkserver (the default since 0f31845) against spawned ones, on one
# CUDA machine, from the repository root with the package's requirements importable:
#   KIMI_BENCH_GIT_COMMIT=$(git rev-parse HEAD) bash scripts/h200-forkserver.sh OUTDIR
# For each start method: micro (2 ranks, every arm, shm, the GPU decoder of $RUNTIME, default
# pr-33921) and a small serve-ab (2 ranks, rate inf, eager/deferred/deferred-decode); then the copy ledgers,
# the recipe's step names, the decoders and each arm's exactness are compared between the
# two, and pytest -m gpu runs under the default. One summary file: OUTDIR/summary.json.
set -u -o pipefail
out=${1:?usage: h200-forkserver.sh OUTDIR}
kb=(python3 -m kimi_bench.cli.main)
runtime=${RUNTIME:-pr-33921}  # torchvision nvJPEG; sglang-0.5.23 needs nvidia-nvimgcodec-cu13 (25 MB)
export PYTHONPATH=${PYTHONPATH:-$PWD} PYTHONUNBUFFERED=1
mkdir -p "$out"
status=0
for m in forkserver spawn; do
  t0=$SECONDS
  KIMI_BENCH_START_METHOD=$m "${kb[@]}" micro --synthetic 4x1536x1024 --content photo --ranks 2 \
    --arms eager,deferred,zero-copy,deferred-decode --transport shm --repeats 10 --warmup 2 --runtime "$runtime" \
    --device cuda --output-dir "$out/micro-$m" > "$out/micro-$m.log" 2>&1 || status=1
  echo "micro $m: $((SECONDS - t0)) s, $(tail -1 "$out/micro-$m.log")"
  t0=$SECONDS
  KIMI_BENCH_START_METHOD=$m "${kb[@]}" serve-ab --request-rate inf --ranks 2 \
    --image-resolution 1536x1024 --image-content photo --arms eager,deferred,deferred-decode \
    --num-prompts 24 --runtime "$runtime" --device cuda --output-dir "$out/serve-$m" > "$out/serve-$m.log" 2>&1 \
    || status=1
  echo "serve-ab $m: $((SECONDS - t0)) s, $(tail -1 "$out/serve-$m.log")"
done
python3 - "$out" <<'PY' || status=1
import json, sys
from pathlib import Path
out = Path(sys.argv[1])
def load(p):
    return json.loads(p.read_text()) if p.is_file() else None
summary = {}
for kind in ("micro", "serve"):
    a, b = load(out / f"{kind}-forkserver/report.json"), load(out / f"{kind}-spawn/report.json")
    if a is None or b is None:
        summary[kind] = "a report is missing"
        continue
    def ledger(r):
        arms = r.get("arms") or {}
        return {arm: [(c["stage"], c["op"], c["src"], c["dst"], c["bytes"], c["count"])
                      for c in (v.get("copies") or [])] for arm, v in arms.items()}
    summary[kind] = {
        "same_ledger": ledger(a) == ledger(b),
        "same_recipe": a.get("recipe") == b.get("recipe"),
        "same_decodes_keys": sorted(a.get("decodes") or {}) == sorted(b.get("decodes") or {}),
        "environment": a.get("environment"),
        "summary_forkserver": a.get("summary"),
        "summary_spawn": b.get("summary"),
    }
(out / "summary.json").write_text(json.dumps(summary, indent=1, default=str))
print(json.dumps({k: (v if isinstance(v, str) else {x: v[x] for x in v if x.startswith("same")})
                  for k, v in summary.items()}))
PY
t0=$SECONDS
timeout 240 python3 -m pytest -q -p no:randomly -m gpu tests/gpu > "$out/pytest-gpu.log" 2>&1 || status=1
echo "pytest -m gpu: $((SECONDS - t0)) s, $(tail -1 "$out/pytest-gpu.log")"
exit $status
