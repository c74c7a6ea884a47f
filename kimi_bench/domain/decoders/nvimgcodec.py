"""``nvimgcodec``: sglang 0.5.23's JPEG decode for Kimi-K3 (``gpu_image_decode =
"nvjpeg_fancy"``, ``sglang/srt/utils/nvjpeg_decoder.py``): NVIDIA nvImageCodec, nvJPEG
with fancy (non-nearest) chroma upsampling, planar RGB, EXIF orientation not applied, a
pool of two decoders per GPU, the result handed to torch through DLPack (no copy) as a
CUDA uint8 CHW tensor on the decoding GPU.

The runtime takes this path only for bytes framed as a JPEG (SOI ... EOI) on a CUDA
machine; when ``nvidia.nvimgcodec`` cannot be imported or the decode fails it falls back
to PIL with a warning (installed in the Kimi-K3 CUDA serving images; ``pip install
'kimi-bench[gpu-decode]'`` here)."""

from __future__ import annotations

import importlib
import importlib.util
import queue
import threading
from typing import Any

import torch

from kimi_bench.domain.decoders.base import DecodeError, Decoder, DeviceImage, is_jpeg

OPTIONS = ":num_cuda_streams=1 :fancy_upsampling=1"  # the runtime's decoder options
POOL_SIZE = 2  # decoders per GPU, as the runtime keeps them


class _Pool:
    """Up to ``POOL_SIZE`` decoders of one GPU, shared by the threads that decode."""

    def __init__(self, device_id: int) -> None:
        self.codec: Any = importlib.import_module("nvidia.nvimgcodec")
        self.device_id = device_id
        self.params = self.codec.DecodeParams(
            sample_format=self.codec.SampleFormat.P_RGB, apply_exif_orientation=False
        )
        self.free: queue.LifoQueue[Any] = queue.LifoQueue(maxsize=POOL_SIZE)
        self.made = 0
        self.lock = threading.Lock()

    def _take(self) -> Any:
        try:
            return self.free.get_nowait()
        except queue.Empty:
            pass
        with self.lock:
            if self.made < POOL_SIZE:
                self.made += 1
                return self.codec.Decoder(
                    device_id=self.device_id, max_num_cpu_threads=1, options=OPTIONS
                )
        return self.free.get()

    def decode(self, data: bytes) -> torch.Tensor:
        decoder = self._take()
        try:
            stream = torch.cuda.current_stream(self.device_id)
            image = decoder.decode(data, params=self.params, cuda_stream=stream.cuda_stream)
            if image is None:
                raise DecodeError("nvImageCodec could not decode the JPEG image")
            return torch.from_dlpack(image.to_dlpack(cuda_stream=stream.cuda_stream))
        finally:
            self.free.put(decoder)


_POOLS: dict[int, _Pool] = {}
_POOLS_LOCK = threading.Lock()


def _pool(device_id: int) -> _Pool:
    with _POOLS_LOCK:
        if device_id not in _POOLS:
            _POOLS[device_id] = _Pool(device_id)
        return _POOLS[device_id]


class NvImageCodecDecoder(Decoder):
    on_device = True
    label = "NVIDIA nvImageCodec (nvJPEG, fancy upsampling)"
    distributions = ("nvidia-nvimgcodec-cu13", "nvidia-nvimgcodec-cu12", "nvidia-nvimgcodec")
    mirrors = "load_image: nvjpeg_decoder.decode_jpeg_with_fancy_upsampling"

    def unavailable(self, device: torch.device) -> str | None:
        if device.type != "cuda":
            return "no CUDA device"
        try:
            found = importlib.util.find_spec("nvidia.nvimgcodec") is not None
        except (ImportError, ValueError):
            found = False
        if found:
            return None
        major = (torch.version.cuda or "12").split(".")[0]
        return (
            "nvImageCodec not importable (nvidia.nvimgcodec; "
            f"pip install 'kimi-bench[gpu-decode-cu{major}]')"
        )

    def refuses(self, data: bytes) -> str | None:
        return None if is_jpeg(data) else "not a JPEG (SOI ... EOI)"

    def decode(self, data: bytes, device: torch.device) -> Any:
        index = device.index if device.index is not None else torch.cuda.current_device()
        with torch.cuda.device(index):
            t = _pool(index).decode(data)
        if t.dim() != 3 or t.shape[0] != 3 or t.dtype != torch.uint8:
            raise DecodeError(f"nvImageCodec returned an invalid JPEG tensor: {tuple(t.shape)}")
        return DeviceImage(t, self.name)
