#!/usr/bin/env bash
# Baselines on the two-GPU H200 host (nvidia-h200-x2): 2 ranks on 2 GPUs (one GPU per rank,
# the encoder-output gather moves BF16 tensors over NCCL) vs 2 ranks sharing GPU 0
# (CUDA_VISIBLE_DEVICES=0: one PCIe link, metadata-only gather). About 5 minutes.
# Usage on the machine, from the repository root:
#   KIMI_BENCH_GIT_COMMIT=$(git rev-parse HEAD) bash scripts/h200x2-baselines.sh OUTDIR [parts]
# parts: any of "micro serve" (default: both); "tests" first runs the two-GPU NCCL gather
# tests (pytest -m gpu tests/gpu/test_nccl_gather.py, about a minute); "torchrun" adds a
# one-node torchrun micro run (needs the CLI's --launcher). Every run writes its own folder
# under OUTDIR:
#   micro/r2-2gpu  micro/r2-1gpu  serve-ab/r2-2gpu  serve-ab/r2-1gpu  [micro/r2-2gpu-torchrun]
set -u -o pipefail
out=${1:?usage: h200x2-baselines.sh OUTDIR [parts]}
parts=${2:-"micro serve"}
kb=(python3 -m kimi_bench.cli.main)
export PYTHONPATH=${PYTHONPATH:-$PWD} PYTHONUNBUFFERED=1
# NVLink multicast (NVLS) stays off on these machines
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
transport=${TRANSPORT:-shm}
repeats=${MICRO_REPEATS:-15}
requests=${SERVE_REQUESTS:-40}
mkdir -p "$out"
gpus=$(python3 -c "import torch; print(torch.cuda.device_count())")
if [[ $gpus -lt 2 ]]; then
  echo "h200x2-baselines: needs two CUDA devices, found $gpus" >&2
  exit 2
fi
{
  nvidia-smi topo -m
  nvidia-smi --format=csv \
    --query-gpu=index,name,pci.bus_id,pcie.link.gen.current,pcie.link.width.current
} >"$out/topology.txt" 2>&1 || true
python3 -c "import torch; print('torch', torch.__version__, 'nccl', torch.cuda.nccl.version())" \
  >>"$out/topology.txt" 2>&1 || true
NOTE_2GPU="2 ranks on 2 GPUs of one host (one GPU per rank): each rank's H2D uses its own PCIe \
link and the encoder-output gather moves the owners' BF16 outputs over NCCL (NVLink), timed \
as the 'gather' stage. Compare with r2-1gpu (both ranks on GPU 0)."
NOTE_1GPU="2 ranks share GPU 0 (CUDA_VISIBLE_DEVICES=0): their device copies contend for one \
PCIe link and the gather carries metadata only (as before issue 15). Compare with r2-2gpu."
status=0
if [[ $parts == *tests* ]]; then
  python3 -m pytest -q -m gpu tests/gpu/test_nccl_gather.py >"$out/gpu-tests.txt" 2>&1 || status=1
  tail -n 3 "$out/gpu-tests.txt"
fi
# one configuration: NAME, the CUDA_VISIBLE_DEVICES value, the note
run_pair() {
  local name=$1 visible=$2 note=$3
  if [[ $parts == *micro* ]]; then
    CUDA_VISIBLE_DEVICES=$visible "${kb[@]}" micro --synthetic 4x1536x1024 --ranks 2 \
      --transport "$transport" --repeats "$repeats" --warmup 3 --device cuda --note "$note" \
      --out "$out/micro/r2-$name" || status=1
  fi
  if [[ $parts == *serve* ]]; then
    CUDA_VISIBLE_DEVICES=$visible "${kb[@]}" serve-ab --rates 2,8,inf --ranks 2 \
      --processor-workers 2 --requests "$requests" --warmup-requests 4 \
      --image-resolution 1536x1024 --preset kimi-k3 --transport "$transport" --device cuda \
      --note "$note" \
      --out "$out/serve-ab/r2-$name" || status=1
  fi
}
run_pair 2gpu 0,1 "$NOTE_2GPU"
run_pair 1gpu 0 "$NOTE_1GPU"
if [[ $parts == *torchrun* ]]; then
  CUDA_VISIBLE_DEVICES=0,1 python3 -m torch.distributed.run --standalone --nproc-per-node 2 \
    -m kimi_bench.cli.main micro --launcher torchrun --synthetic 4x1536x1024 \
    --transport "$transport" --repeats "$repeats" --warmup 3 --device cuda \
    --note "torchrun, one node: $NOTE_2GPU" --out "$out/micro/r2-2gpu-torchrun" || status=1
fi
exit $status
