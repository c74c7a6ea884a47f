"""Stand-ins for the vision encoder and the LLM prefill in ``serve-ab``.

They are *not* the model: each runs a chain of square matmuls whose FLOP count is set by
the scenario (``encoder_gflop_per_patch``, ``prefill_gflop_per_token``), so GPU (or CPU)
time grows with the patch and token counts the way a real tower and prefill do. The
defaults (``options.StandinOptions``) are sized from public figures: MoonViT (~0.4 B
parameters) costs ~0.8 GFLOP per patch; the prefill default (6 GFLOP per token, split over
the TP ranks) is a ~3 B-active model, far smaller than Kimi-K3, so that eight ranks sharing
one GPU finish in reasonable time.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from kimi_bench.options import StandinOptions


@dataclass(frozen=True)
class StandinCost:
    """The stand-ins' sizes, from the options (their defaults are written there only)."""

    encoder_gflop_per_patch: float
    prefill_gflop_per_token: float
    decode_gflop_per_token: float  # one token per running request per decode step
    text_tokens_per_request: int
    cpu_flops_scale: float  # on CPU-only runs, FLOPs are scaled down by this

    @classmethod
    def from_options(cls, opts: StandinOptions) -> StandinCost:
        return cls(**opts.model_dump())

    def scaled(self, device: torch.device, ranks: int = 1) -> float:
        """FLOP multiplier for one rank. On CPU: ``cpu_flops_scale``. When R ranks share
        G < R GPUs, each rank does G/R of its work, so the device time per step matches R
        ranks on R GPUs (the shape the stand-ins model)."""
        if device.type != "cuda":
            return self.cpu_flops_scale
        gpus = max(1, torch.cuda.device_count())
        return min(1.0, gpus / max(1, ranks))


class MatmulChain:
    """``rows x width`` activations through square ``width x width`` weights, repeated
    until the requested FLOPs are spent (at least once when any work is asked for)."""

    def __init__(self, device: torch.device, width: int | None = None, seed: int = 0) -> None:
        self.device = device
        self.width = width or (1024 if device.type == "cuda" else 256)
        self.dtype = torch.bfloat16 if device.type == "cuda" else torch.float32
        gen = torch.Generator(device="cpu").manual_seed(seed)
        w = torch.randn(self.width, self.width, generator=gen) / self.width**0.5
        self.weight = w.to(device=device, dtype=self.dtype)

    def run(self, rows: int, gflop: float) -> float:
        """Spend ~``gflop`` GFLOP on ``rows`` rows; returns the GFLOP actually executed."""
        if rows <= 0 or gflop <= 0:
            return 0.0
        per_pass = 2.0 * rows * self.width * self.width / 1e9
        passes = max(1, round(gflop / per_pass))
        x = torch.ones(rows, self.width, device=self.device, dtype=self.dtype)
        for _ in range(passes):
            x = torch.tanh(x @ self.weight)
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)
        return passes * per_pass
