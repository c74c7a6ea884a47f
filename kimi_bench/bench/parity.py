"""``parity``: are eager and deferred features bit-identical on these images, and why was
each image deferred or not?"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from kimi_bench.config import PreprocessConfig
from kimi_bench.contract import audit_contract
from kimi_bench.corpus import (
    DEFAULT_MAX_PIXELS,
    CorpusEntry,
    InputError,
    builtin_corpus,
    describe_input,
    folder_corpus,
)
from kimi_bench.environment import environment, resolve_device
from kimi_bench.navit import ResizePlan, plan_resize
from kimi_bench.pipeline import run_deferred, run_eager
from kimi_bench.pixels import StagingError, input_size, stage_input
from kimi_bench.policy import PolicyMode
from kimi_bench.reference import max_abs_diff, pil_reference
from kimi_bench.report import Report, View
from kimi_bench.runtime import DEFAULT_RUNTIME, get_profile

RESULT_KEYS = (
    "name",
    "width",
    "height",
    "mode",
    "deferred",
    "reason",
    "grid_thw",
    "num_tokens",
    "raw_bytes",
    "processed_bytes",
    "owner_rank",
    "bit_exact_fp32",
    "bit_exact_bf16",
    "max_abs_diff_vs_pil",
    "error",
)


@dataclass
class ParityOptions:
    cfg: PreprocessConfig
    images_dir: Path | None = None
    device: str = "auto"
    ranks: int = 2
    runtime: str = DEFAULT_RUNTIME
    policy: PolicyMode | None = None  # None: the runtime profile's decision scope
    images_per_request: int = 1
    batch_size: int = 4
    seed: int = 0
    max_pixels: int = DEFAULT_MAX_PIXELS
    dump_dir: Path | None = None
    reference: bool = True

    def validate(self) -> None:
        if self.ranks < 1:
            raise ValueError(f"--ranks must be >= 1, got {self.ranks}")
        if self.batch_size < 1 or self.images_per_request < 1:
            raise ValueError("--batch-size and --images-per-request must be >= 1")
        get_profile(self.runtime)
        if self.policy not in (None, "request", "image"):
            raise ValueError(f"--policy must be request or image, got {self.policy!r}")


@dataclass
class _Accepted:
    row: dict[str, Any]
    obj: Any
    plan: ResizePlan


def _empty_row(entry: CorpusEntry) -> dict[str, Any]:
    row: dict[str, Any] = dict.fromkeys(RESULT_KEYS)
    row["name"] = entry.name
    row["source"] = entry.source
    row["warning"] = None
    return row


def _prepare(entry: CorpusEntry, cfg: PreprocessConfig) -> _Accepted | dict[str, Any]:
    """Load, plan and check staging; a failure returns the row with its error."""
    row = _empty_row(entry)
    try:
        obj = entry.load()
        row["mode"] = describe_input(obj)
        w, h = input_size(obj)
        row["width"], row["height"] = w, h
        stage_input(obj, cfg, require_uint8=False)  # layout/mode check before any arm runs
        plan = plan_resize(w, h, cfg)
    except (InputError, StagingError, ValueError, OSError) as exc:
        row["error"] = f"{type(exc).__name__}: {exc}".splitlines()[0]
        return row
    if row["mode"] == "I;16":
        row["warning"] = "16-bit values above 255 are clipped by PIL's convert('RGB'), as upstream"
    row["grid_thw"] = list(plan.grid_thw)
    row["num_tokens"] = plan.num_tokens
    return _Accepted(row, obj, plan)


def _run_batch(
    batch: list[_Accepted], opts: ParityOptions, producer: torch.device, rank_dev: torch.device
) -> None:
    objs = [a.obj for a in batch]
    plans = [a.plan for a in batch]
    eager = run_eager(objs, plans, opts.cfg, opts.ranks, producer, rank_dev, runtime=opts.runtime)
    deferred = run_deferred(
        objs,
        plans,
        opts.cfg,
        opts.ranks,
        producer,
        rank_dev,
        runtime=opts.runtime,
        policy=opts.policy,
        images_per_request=opts.images_per_request,
    )
    for i, acc in enumerate(batch):
        d = deferred.decisions[i]
        e_fp, d_fp = eager.fp32[i], deferred.fp32[i]
        acc.row.update(
            deferred=d.defer,
            reason=d.reason,
            raw_bytes=d.raw_bytes,
            processed_bytes=d.processed_bytes,
            owner_rank=deferred.owners[i],
            bit_exact_fp32=bool(torch.equal(e_fp, d_fp)),
            bit_exact_bf16=bool(torch.equal(eager.bf16[i], deferred.bf16[i])),
        )
        if opts.reference:
            ref = pil_reference(acc.obj, acc.plan, opts.cfg)
            acc.row["max_abs_diff_vs_pil"] = None if ref is None else max_abs_diff(ref, d_fp)
        if opts.dump_dir is not None:
            opts.dump_dir.mkdir(parents=True, exist_ok=True)
            torch.save(
                {"eager": e_fp, "deferred": d_fp, "grid_thw": torch.tensor(acc.plan.grid_thw)},
                opts.dump_dir / f"{Path(acc.row['name']).stem}.pt",
            )


def run_parity(
    opts: ParityOptions, progress: Callable[[str, int, int], None] | None = None
) -> Report:
    """Run both arms over the corpus; ``progress(name, n_done, n_total)`` per input."""
    opts.validate()
    rank_dev = resolve_device(opts.device)
    producer = rank_dev
    entries = (
        folder_corpus(opts.images_dir, opts.max_pixels)
        if opts.images_dir is not None
        else builtin_corpus(opts.cfg, opts.seed)
    )
    rows: list[dict[str, Any]] = []
    pending: list[_Accepted] = []
    done = 0

    def flush() -> None:
        nonlocal done
        if not pending:
            return
        try:
            _run_batch(pending, opts, producer, rank_dev)
        except (RuntimeError, ValueError) as exc:  # one bad batch never ends the run
            for acc in pending:
                acc.row["error"] = f"{type(exc).__name__}: {exc}".splitlines()[0]
        for acc in pending:
            done += 1
            if progress:
                progress(acc.row["name"], done, len(entries))
        pending.clear()

    for entry in entries:
        prepared = _prepare(entry, opts.cfg)
        if isinstance(prepared, _Accepted):
            rows.append(prepared.row)
            pending.append(prepared)
            if len(pending) >= opts.batch_size:
                flush()
        else:
            rows.append(prepared)
            done += 1
            if progress:
                progress(prepared["name"], done, len(entries))
    flush()
    return _build_report(opts, rows, rank_dev, len(entries))


def _build_report(
    opts: ParityOptions, rows: list[dict[str, Any]], device: torch.device, n_entries: int
) -> Report:
    accepted = [r for r in rows if r["error"] is None]
    errors = [r for r in rows if r["error"] is not None]
    diffs = [r["max_abs_diff_vs_pil"] for r in accepted if r["max_abs_diff_vs_pil"] is not None]
    all_fp32 = bool(accepted) and all(r["bit_exact_fp32"] for r in accepted)
    all_bf16 = bool(accepted) and all(r["bit_exact_bf16"] for r in accepted)
    audit = audit_contract(opts.cfg)
    differing = [r["name"] for r in accepted if not (r["bit_exact_fp32"] and r["bit_exact_bf16"])]
    if not accepted:
        verdict = "NO INPUTS: nothing was accepted" + (" (empty folder)" if not n_entries else "")
    elif differing:
        verdict = f"DIFFERS: {len(differing)} of {len(accepted)} inputs ({', '.join(differing)})"
    else:
        verdict = (
            f"BIT-IDENTICAL: {len(accepted)} of {len(accepted)} accepted inputs equal in FP32 "
            f"and BF16 ({len(errors)} rejected with an error)"
        )
    notes = [
        "bit_exact_* compare the owner's eager and deferred pixel_values with torch.equal "
        "(FP32, and after the cast into the BF16 tower buffer).",
        "max_abs_diff_vs_pil compares the deferred FP32 features with a PIL-BICUBIC "
        "reference (not expected to be zero; one 8-bit level is 1/127.5 = 0.00784).",
    ]
    if device.type == "cpu":
        notes.append(
            "device cpu: the owner's CUDA device is emulated on the CPU (the policy is told the "
            "owner can materialize); producer and owner both run on the CPU."
        )
    if not n_entries:
        notes.append("the input folder holds no files")
    summary = {
        "verdict": verdict,
        "inputs": len(rows),
        "accepted": len(accepted),
        "errors": len(errors),
        "deferred": sum(1 for r in accepted if r["deferred"]),
        "all_bit_exact_fp32": all_fp32,
        "all_bit_exact_bf16": all_bf16,
        "differing": differing,
        "max_abs_diff_vs_pil": max(diffs) if diffs else None,
        "contract_audit": audit.summary(),
    }
    config = {
        "preprocess": opts.cfg.summary(),
        "images": str(opts.images_dir) if opts.images_dir else "built-in corpus",
        "device": opts.device,
        "ranks": opts.ranks,
        "runtime": get_profile(opts.runtime).summary(),
        "policy": opts.policy or get_profile(opts.runtime).decision_scope,
        "images_per_request": opts.images_per_request,
        "batch_size": opts.batch_size,
        "max_pixels": opts.max_pixels,
    }
    env = environment(device, opts.cfg.name, opts.seed, owner_device_emulated=device.type == "cpu")
    cols = [
        "name",
        "width",
        "height",
        "mode",
        "deferred",
        "grid_thw",
        "owner_rank",
        "bit_exact_fp32",
        "bit_exact_bf16",
        "max_abs_diff_vs_pil",
        "reason",
        "error",
    ]
    return Report(
        kind="parity",
        environment=env,
        config=config,
        results=rows,
        summary=summary,
        notes=notes,
        views=[View("Per input", rows, cols)],
    )


def exit_code(report: Report) -> int:
    """0 all accepted inputs identical, 1 any differs, 2 nothing usable."""
    s = report.summary
    if not s["accepted"]:
        return 2
    return 0 if s["all_bit_exact_fp32"] and s["all_bit_exact_bf16"] else 1
