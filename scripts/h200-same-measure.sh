#!/usr/bin/env bash
# Does a refactor measure what the code before it measured? On one CUDA machine, from the
# repository root with the package's requirements importable:
#   KIMI_BENCH_GIT_COMMIT=$(git rev-parse --short HEAD) bash scripts/h200-same-measure.sh BASE OUTDIR
# BASE is a folder holding the earlier commit's kimi_bench package (git archive BASE_COMMIT
# kimi_bench | tar -x -C BASE). micro (2 ranks, every arm, shm, the GPU decoder of $RUNTIME,
# default pr-33921) runs four times, alternating base and head, and serve-ab (2 ranks, rate
# inf, eager/deferred/deferred-decode) twice, base first; then every copy-ledger row, the
# recipe's step names, the stage names, the decoders and each repeat's exactness are compared
# between base and head, and the stage medians of every run are listed side by side, with
# `pytest -m gpu` at the end. One summary file: OUTDIR/summary.json. BASE_COMMIT names the
# base in its reports; DEVICE, SYNTH, REPEATS and PROMPTS shrink the run for a CPU try.
set -u -o pipefail
base=${1:?usage: h200-same-measure.sh BASE OUTDIR}
out=${2:?usage: h200-same-measure.sh BASE OUTDIR}
runtime=${RUNTIME:-pr-33921}  # torchvision nvJPEG; sglang-0.5.23 needs nvidia-nvimgcodec-cu13 (25 MB)
device=${DEVICE:-cuda} synth=${SYNTH:-4x1536x1024} repeats=${REPEATS:-10} prompts=${PROMPTS:-24}
head_commit=${KIMI_BENCH_GIT_COMMIT:-head} base_commit=${BASE_COMMIT:-base}
site=${PYTHONPATH:-}
export PYTHONUNBUFFERED=1
mkdir -p "$out"
out=$(cd "$out" && pwd) base=$(cd "$base" && pwd)
status=0
kb() {  # kb TREE ARGS...: kimi-bench from TREE's package
  local tree=$1 commit=$head_commit
  shift
  [[ $tree == "$base" ]] && commit=$base_commit
  # from the tree's folder: python puts the current folder first on sys.path (-m, -c: the
  # forkserver too), so a run from the repository root would import the root's package
  (cd "$tree" && KIMI_BENCH_GIT_COMMIT=$commit PYTHONPATH="$tree${site:+:$site}" \
    python3 -m kimi_bench.cli.main "$@")
}
head=$PWD
for tree in "$base" "$head"; do  # each tree's own package, not an installed one
  # the package as the run's processes see it: this one, a spawned and a forked worker
  got=$(cd "$tree" && PYTHONPATH="$tree${site:+:$site}" python3 -c '
import multiprocessing as mp
import kimi_bench
seen = [kimi_bench.__file__]
for method in ("spawn", "forkserver"):
    with mp.get_context(method).Pool(1) as pool:
        seen.append(pool.apply(eval, ("__import__(\"kimi_bench\").__file__",)))
print(" ".join(sorted(set(seen))))')
  [[ $got == "$tree"/kimi_bench/__init__.py ]] || { echo "kimi_bench from $got, not $tree"; exit 1; }
done
for run in base-1 head-1 base-2 head-2; do
  tree=$head
  [[ $run == base-* ]] && tree=$base
  t0=$SECONDS
  kb "$tree" micro --synthetic "$synth" --content photo --ranks 2 \
    --arms eager,deferred,zero-copy,deferred-decode --transport shm --repeats "$repeats" --warmup 2 \
    --runtime "$runtime" --device "$device" --output-dir "$out/micro-$run" > "$out/micro-$run.log" 2>&1 \
    || status=1
  echo "micro $run: $((SECONDS - t0)) s, $(tail -1 "$out/micro-$run.log")"
done
for run in base head; do
  tree=$head
  [[ $run == base ]] && tree=$base
  t0=$SECONDS
  kb "$tree" serve-ab --request-rate inf --ranks 2 --image-resolution "${synth#*x}" \
    --image-content photo --arms eager,deferred,deferred-decode --num-prompts "$prompts" \
    --runtime "$runtime" --device "$device" --output-dir "$out/serve-$run" > "$out/serve-$run.log" 2>&1 \
    || status=1
  echo "serve-ab $run: $((SECONDS - t0)) s, $(tail -1 "$out/serve-$run.log")"
done
python3 - "$out" <<'PY' || status=1
import json, sys
from pathlib import Path

out = Path(sys.argv[1])
status = 0


def load(name):
    p = out / name / "report.json"
    return json.loads(p.read_text()) if p.is_file() else None


def found(obj, key):
    """Every value stored under ``key`` anywhere in ``obj``, with its path."""
    hits = []
    def walk(o, path):
        if isinstance(o, dict):
            for k, v in o.items():
                if k == key:
                    hits.append((path + "/" + k, v))
                walk(v, path + "/" + k)
        elif isinstance(o, list):
            for i, v in enumerate(o):
                walk(v, f"{path}[{i}]")
    walk(obj, "")
    return hits


def same(a, b, key):
    return found(a, key) == found(b, key)


# rows of pickled metadata, whose bytes and counts follow how requests shared a step
METADATA_OPS = {"pickle", "unpickle", "ipc", "gloo_broadcast", "bytes_copy", "gather_metadata"}


def payload_rows(r):
    tables = [v for _, v in found(r, "copies") if isinstance(v, list)]
    rows = [row for v in tables for row in v if row["op"] not in METADATA_OPS]
    return sorted(json.dumps(row, sort_keys=True) for row in rows)


summary = {}
for kind, pairs in (("micro", [("base-1", "head-1"), ("base-2", "head-2")]),
                    ("serve", [("base", "head")])):
    for x, y in pairs:
        a, b = load(f"{kind}-{x}"), load(f"{kind}-{y}")
        name = f"{kind} {x} vs {y}"
        if a is None or b is None:
            summary[name] = "a report is missing"
            status = 1
            continue
        summary[name] = {
            "same_ledger_rows": same(a, b, "copies"),
            "same_payload_rows": payload_rows(a) == payload_rows(b),
            "same_recipe": same(a, b, "recipe"),
            "same_decoders": same(a, b, "decodes"),
            "same_bit_exact": same(a, b, "bit_exact") and same(a, b, "bit_exact_fp32"),
            "same_stage_names": [sorted(v) for _, v in found(a, "stages") if isinstance(v, dict)]
            == [sorted(v) for _, v in found(b, "stages") if isinstance(v, dict)],
            "commits": [a["environment"]["git"], b["environment"]["git"]],
        }
medians = {}
for run in ("base-1", "head-1", "base-2", "head-2"):
    r = load(f"micro-{run}")
    if r is not None:
        medians[run] = {f"{x['arm']} {x['stage']}": round(x["median_ms"], 3) for x in r["results"]}
        medians[run]["speedup"] = r.get("summary", {}).get("verdict") if isinstance(r.get("summary"), dict) else None
summary["micro stage medians (ms)"] = medians
env = load("micro-head-1")
summary["environment"] = env["environment"] if env else None
(out / "summary.json").write_text(json.dumps(summary, indent=1, default=str))
print(json.dumps({k: v for k, v in summary.items() if k.startswith(("micro ", "serve ")) and "medians" not in k}))
sys.exit(status)
PY
t0=$SECONDS
timeout 240 python3 -m pytest -q -p no:randomly -m gpu tests/gpu > "$out/pytest-gpu.log" 2>&1 || status=1
echo "pytest -m gpu: $((SECONDS - t0)) s, $(tail -1 "$out/pytest-gpu.log")"
exit $status
