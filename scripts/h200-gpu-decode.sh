#!/usr/bin/env bash
# Issue 30 on one H200: the runtime's JPEG decoders on CUDA (nvImageCodec for sglang-0.5.23,
# torchvision nvJPEG for pr-33921), from the repository root of a CUDA machine with the
# package's requirements and nvidia-nvimgcodec-cu13 + nvidia-nvjpeg importable:
#   KIMI_BENCH_GIT_COMMIT=$(git rev-parse HEAD) bash scripts/h200-gpu-decode.sh OUTDIR PARTS
# PARTS, comma-separated, run in this order:
#   smoke   the decoders import and decode on the GPU; pytest -m gpu (tests/gpu); stops the
#           script (exit 3) when it fails, so that no long run follows a broken decoder
#   parity  scripts/jpeg-corpus.py -> OUTDIR/corpus (28 files); parity on it under each
#           profile with its own decoder (auto) -> OUTDIR/parity/jpeg-<runtime>
#   timing  scripts/decode-timing.py on the corpus -> OUTDIR/decode-timing
#   micro-pr, micro-0523  micro 8 ranks, 4x1536x1024 photo content (JPEG q85), every arm,
#           shm and pickle, decoder auto -> OUTDIR/micro/<runtime>/r8-<carrier>-photo
#   serve   serve-ab in the PR's shape (8 ranks, 1536x1024 JPEG photos, rate inf, shm,
#           pr-33921, 80 requests; eager, deferred, deferred-decode), decoder auto
#           -> OUTDIR/serve-ab/pr-33921/r8-shm (SERVE_REPEATS repeats, default 3, for a
#           throughput interval); then the same under sglang-0.5.23
# A step is skipped (and says so) once the call's budget (BUDGET_S, default 560 s) would be
# exceeded by a step of its usual length.
set -u -o pipefail
out=${1:?usage: h200-gpu-decode.sh OUTDIR PARTS}
parts=${2:?usage: h200-gpu-decode.sh OUTDIR PARTS}
budget=${BUDGET_S:-560}
kb=(python3 -m kimi_bench.cli.main)
export PYTHONPATH=${PYTHONPATH:-$PWD} PYTHONUNBUFFERED=1
mkdir -p "$out"
status=0
# shellcheck source=lib/budget-step.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib/budget-step.sh"
micro() {  # micro RUNTIME CARRIER
  "${kb[@]}" micro --synthetic 4x1536x1024 --content photo --ranks 8 --transport "$2" \
    --runtime "$1" --arms eager,deferred,zero-copy,deferred-decode --repeats 20 --warmup 3 \
    --device cuda --output-dir "$out/micro/$1/r8-$2-photo"
}
serve() {  # serve RUNTIME REPEATS
  "${kb[@]}" serve-ab --repeats "$2" --request-rate inf --ranks 8 --image-resolution 1536x1024 \
    --image-content photo --preset kimi-k3 --runtime "$1" --transport shm \
    --arms eager,deferred,deferred-decode --num-prompts 80 --device cuda \
    --output-dir "$out/serve-ab/$1/r8-shm"
}
for part in ${parts//,/ }; do
  case $part in
    smoke)
      python3 - > "$out/smoke.log" 2>&1 <<'EOF'
import importlib.metadata as md, io, torch
from PIL import Image
from kimi_bench.domain.decoders import choose
from kimi_bench.domain.runtime import get_profile
for d in ("torch", "torchvision", "nvidia-nvimgcodec-cu13", "nvidia-nvjpeg", "pillow"):
    try:
        print(d, md.version(d))
    except md.PackageNotFoundError:
        print(d, "not installed")
buf = io.BytesIO()
Image.radial_gradient("L").convert("RGB").resize((1536, 1024)).save(buf, "JPEG", quality=85)
for rt in ("sglang-0.5.23", "pr-33921"):
    c = choose("auto", get_profile(rt), torch.device("cuda"))
    got = c.decode(buf.getvalue(), torch.device("cuda"))
    print(rt, c.reason, "->", got.decoder.name, got.reason, type(got.image).__name__)
    assert got.decoder.name == get_profile(rt).decoder, got.reason
EOF
      rc=$?
      echo "[smoke decode exit $rc]"; cat "$out/smoke.log"
      python3 -m pytest -m gpu tests/gpu -q -p no:cacheprovider -o addopts="" \
        > "$out/pytest-gpu.log" 2>&1 || rc=1
      tail -3 "$out/pytest-gpu.log"
      (( rc == 0 )) || { echo "smoke failed: stopping"; exit 3; }
      ;;
    parity)
      python3 scripts/jpeg-corpus.py "$out/corpus" > "$out/corpus.json" || status=1
      for rt in sglang-0.5.23 pr-33921; do
        step 60 "$out/parity-$rt.log" "${kb[@]}" parity --images "$out/corpus" --device cuda \
          --runtime "$rt" --output-dir "$out/parity/jpeg-$rt"
      done
      ;;
    timing)
      step 60 "$out/timing.log" python3 scripts/decode-timing.py "$out/corpus" \
        "$out/decode-timing"
      ;;
    micro-pr|micro-0523)
      rt=pr-33921; [[ $part == micro-0523 ]] && rt=sglang-0.5.23
      for t in shm pickle; do
        step 110 "$out/micro-$rt-$t.log" micro "$rt" "$t"
        grep -E "^note: deferred-decode|speedup|decod" "$out/micro-$rt-$t.log" | head -8
      done
      ;;
    serve)
      for rt in pr-33921 sglang-0.5.23; do
        n=${SERVE_REPEATS:-3}
        step $((60 * n + 30)) "$out/serve-$rt.log" serve "$rt" "$n"
        tail -4 "$out/serve-$rt.log"
      done
      ;;
    *) echo "unknown part $part" >&2; exit 2 ;;
  esac
done
exit $status
