"""``parity``: are eager and deferred features bit-identical on these images, and why was
each image deferred or not?"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch

from kimi_bench.bench.parity_arms import by_role, other_arms_summary, run_other_arms
from kimi_bench.bench.parity_decode import (
    DECODE_KEYS,
    decode_note,
    decode_summary,
    encoded_input,
    run_decode_arm,
)
from kimi_bench.bench.parity_outputs import DumpWriter, check_dump, parity_report
from kimi_bench.bench.parity_pixels import (
    PIXEL_KEYS,
    decode_batch,
    feature_distance,
    not_deterministic_line,
    on_device,
    pixels_summary,
)
from kimi_bench.bench.parity_reference import apply_reference
from kimi_bench.bench.parity_vllm import run_vllm_parity
from kimi_bench.bench.reference import max_abs_diff, pil_reference
from kimi_bench.domain.config import PreprocessConfig, resolve_config
from kimi_bench.domain.contract import audit_contract
from kimi_bench.domain.corpus import (
    CorpusEntry,
    builtin_corpus,
    describe_input,
    folder_corpus,
    missing_photos_note,
)
from kimi_bench.domain.corpus_files import InputError
from kimi_bench.domain.decoders import choose, replayed
from kimi_bench.domain.encoded import EncodedImage
from kimi_bench.domain.navit import ResizePlan, plan_resize
from kimi_bench.domain.pixels import StagingError, input_size, stage_input
from kimi_bench.domain.runtime import VLLM, get_profile
from kimi_bench.infra.environment import HostLoad, host_load, resolve_device
from kimi_bench.infra.limits import interrupt_reason, sigterm_as_interrupt
from kimi_bench.options import ParityOptions
from kimi_bench.pipeline import recipe_record, run_arm
from kimi_bench.report.model import Report
from kimi_bench.results import derive_parity, parity_rows

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
    *DECODE_KEYS,
    *PIXEL_KEYS,
)


NOT_FINITE = (
    "InputError: the features hold inf or NaN (the input's values or the config's "
    "image_mean/image_std overflow float32/bfloat16): not a parity result"
)


@dataclass
class _Accepted:
    row: dict[str, Any]
    obj: Any
    plan: ResizePlan
    encoded: EncodedImage | None = None  # the input's encoded form (deferred-decode arm)


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
    warnings = [entry.note] if getattr(entry, "note", None) else []
    if row["mode"] == "I;16":
        warnings.append("16-bit values above 255 are clipped by PIL's convert('RGB'), as upstream")
    row["warning"] = "; ".join(w for w in warnings if w) or None
    row["grid_thw"] = list(plan.grid_thw)
    row["num_tokens"] = plan.num_tokens
    try:
        encoded = encoded_input(entry, obj)
    except (InputError, OSError, ValueError) as exc:  # the arm takes the raw path then
        encoded = None
        row["warning"] = "; ".join(filter(None, [row["warning"], f"no encoded form: {exc}"]))
    return _Accepted(row, obj, plan, encoded)


def _run_batch(
    batch: list[_Accepted],
    opts: ParityOptions,
    cfg: PreprocessConfig,
    producer: torch.device,
    rank_dev: torch.device,
    dump: DumpWriter,
) -> dict[str, list[str]]:
    """Every parity arm over one batch, on the pixels the runtime's decoder makes of each
    encoded input (``parity_pixels``), into the rows (``--dump``: both arms' FP32 per
    input); returns the change's recipe."""
    # the runtime decodes each request's image once: every arm is fed that one decode
    choice = replayed(choose(opts.decoder, get_profile(opts.runtime_spec), producer))
    objs, pixel_rows = decode_batch([a.obj for a in batch], [a.encoded for a in batch],
                                    choice, producer, cfg)  # fmt: skip
    plans = [a.plan for a in batch]
    same: dict[str, Any] = {  # the profile as asked: --no-preprocess-cache reaches every arm
        "runtime": opts.runtime_spec,
        "decoder": choice,
        "baseline_whitelisted": opts.eager_baseline == "deferral-off",
    }
    kw = same | {"policy": opts.policy, "images_per_request": opts.images_per_request}
    eager = run_arm(by_role("baseline"), objs, plans, cfg, opts.ranks, producer, rank_dev, **same)
    deferred = run_arm(by_role("change"), objs, plans, cfg, opts.ranks, producer, rank_dev, **kw)
    if idx := on_device(objs):  # how far the runtime's pixels move the BF16 features
        pil = run_arm(by_role("change"), [batch[i].obj for i in idx], [plans[i] for i in idx],
                      cfg, opts.ranks, producer, rank_dev, **same)  # fmt: skip
        moved = feature_distance([deferred.bf16[i] for i in idx], pil.bf16)
        for i, dist in zip(idx, moved, strict=True):
            pixel_rows[i]["vs_pil_bf16_max_abs"] = dist
    decode_rows = run_decode_arm(
        objs, [a.encoded for a in batch], plans, eager, cfg, opts.ranks, producer, rank_dev, **kw
    )
    other_rows = run_other_arms(objs, plans, eager, cfg, opts.ranks, producer, rank_dev, **kw)
    for i, acc in enumerate(batch):
        acc.row.update(decode_rows[i], **other_rows[i], **pixel_rows[i])
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
        if not (torch.isfinite(e_fp).all() and torch.isfinite(eager.bf16[i]).all()):
            acc.row["error"] = NOT_FINITE  # equal infinities are no evidence of parity
        if opts.reference == "pil":
            ref = pil_reference(acc.obj, acc.plan, cfg)
            acc.row["max_abs_diff_vs_pil"] = None if ref is None else max_abs_diff(ref, d_fp)
        grid = torch.tensor(acc.plan.grid_thw)
        dump.save(acc.row["name"], {"eager": e_fp, "deferred": d_fp, "grid_thw": grid})
    return recipe_record(*deferred.trails[:2])


def run_parity(
    opts: ParityOptions,
    progress: Callable[[str, int, int], None] | None = None,
    cfg: PreprocessConfig | None = None,
    reference_runtime: Any = None,
    *,
    overwrite: bool = False,
) -> Report:
    """Every arm over the corpus (``progress`` per input; ``overwrite``: --dump may replace)."""
    cfg = cfg or resolve_config(opts.preset, opts.config)
    if get_profile(opts.runtime).runtime == VLLM:  # no eager/deferred: vLLM's own parity
        return run_vllm_parity(opts, progress, cfg, reference_runtime, RESULT_KEYS)
    load_start = host_load()
    rank_dev = resolve_device(opts.device)
    producer = rank_dev
    entries = (
        folder_corpus(opts.images, opts.max_pixels, follow_links=opts.follow_links)
        if opts.images is not None
        else builtin_corpus(cfg, opts.seed)
    )
    check_dump(opts.dump, [e.name for e in entries], overwrite)
    dump = DumpWriter(opts.dump)
    rows: list[dict[str, Any]] = []
    pending: list[_Accepted] = []
    done = 0
    recipe: dict[str, list[str]] = {}

    def flush() -> None:
        nonlocal done
        if not pending:
            return
        try:
            recipe.update(_run_batch(pending, opts, cfg, producer, rank_dev, dump))
        except (RuntimeError, ValueError, OSError) as exc:  # one bad batch never ends the run
            for acc in pending:
                acc.row["error"] = f"{type(exc).__name__}: {exc}".splitlines()[0]
        for acc in pending:
            done += 1
            if progress:
                progress(acc.row["name"], done, len(entries))
        pending.clear()

    interrupted: str | None = None
    try:
        with sigterm_as_interrupt():
            for entry in entries:
                prepared = _prepare(entry, cfg)
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
    except KeyboardInterrupt as exc:  # SIGINT or SIGTERM: the inputs done so far are kept
        interrupted = interrupt_reason(exc)
        unfinished = {id(a.row) for a in pending}
        rows = [r for r in rows if id(r) not in unfinished]
    report = _build_report(opts, cfg, rows, rank_dev, len(entries), load_start)
    if recipe:
        report.data["recipe"] = {by_role("change").name: recipe}
    if dump.error:
        report.data["dump_error"] = dump.error
        report.notes.append(f"{dump.error}; no dump after it was written")
    if opts.images is None and (missing := missing_photos_note()):
        report.notes.append(missing)
    if interrupted:
        report.summary["verdict"] = (
            f"INCOMPLETE: {interrupted} after {len(rows)} of {len(entries)} inputs; "
            + report.summary["verdict"]
        )
        report.notes.append(f"run stopped early: {interrupted}; results are partial.")
        return report
    if opts.reference == "sglang":
        apply_reference(report, opts, cfg, entries, rows, rank_dev, reference_runtime)
    return report


def _build_report(
    opts: ParityOptions,
    cfg: PreprocessConfig,
    rows: list[dict[str, Any]],
    device: torch.device,
    n_entries: int,
    load_start: HostLoad,
) -> Report:
    accepted = [r for r in rows if r["error"] is None]
    errors = [r for r in rows if r["error"] is not None]
    derived = derive_parity(parity_rows(rows))
    differing = list(derived.differing)
    audit = audit_contract(cfg)
    decode = decode_summary(accepted)
    others = other_arms_summary(accepted)
    pixels = pixels_summary(accepted)
    verdict = _verdict(accepted, errors, differing, decode, n_entries)
    if pixels and accepted and not differing:
        verdict += f"; decode: {pixels['line']}"
    elif pixels and pixels["not_deterministic"]:  # named apart from any exactness failure
        verdict += f"; {not_deterministic_line(pixels['not_deterministic'])}"
    notes = _base_notes(device, n_entries)
    summary = {
        "verdict": verdict,
        **derived.summary_fields(),
        "max_abs_diff_vs_pil": derived.max_abs_diff_vs_pil,
        "contract_audit": audit.summary(),
        "deferred_decode": decode,
    }
    if others:  # arms beside the built-in ones (none by default)
        summary["arms"] = others
    if pixels:
        summary["decoding"] = pixels
    scope = opts.policy or get_profile(opts.runtime_spec).decision_scope
    return parity_report(opts, cfg, device, load_start, rows, summary, notes, decision_scope=scope)


def exit_code(report: Report) -> int:
    """0 all accepted inputs identical, 1 any differs, 2 nothing usable."""
    s = report.summary
    if str(s["verdict"]).startswith("INCOMPLETE"):
        return 1  # interrupted: the inputs done so far are in the report
    if not s["accepted"]:
        return 2
    if s.get("reference", {}).get("differing"):
        return 1
    if s.get("deferred_decode", {}).get("differing"):
        return 1
    if any(not a["all_bit_exact"] for a in (s.get("arms") or {}).values()):
        return 1
    return 0 if s["all_bit_exact_fp32"] is not False and s["all_bit_exact_bf16"] else 1


def _verdict(
    accepted: list[dict[str, Any]],
    errors: list[dict[str, Any]],
    differing: list[str],
    decode: dict[str, Any],
    n_entries: int,
) -> str:
    """The one-line verdict before any interruption or reference is folded in."""
    if not accepted:
        verdict = "NO INPUTS: nothing was accepted" + (" (empty folder)" if not n_entries else "")
    elif differing:
        verdict = f"DIFFERS: {len(differing)} of {len(accepted)} inputs ({', '.join(differing)})"
    else:
        verdict = (
            f"BIT-IDENTICAL: {len(accepted)} of {len(accepted)} accepted inputs equal in FP32 "
            f"and BF16 ({len(errors)} rejected with an error)"
        )
        if decode["arm"]:
            verdict += (
                f"; {decode['arm']} (proposed): {decode['encoded']} travelled encoded, "
                f"{decode['routed_raw']} routed to raw uint8"
            )
    return verdict


def _base_notes(device: torch.device, n_entries: int) -> list[str]:
    """The notes every parity report carries, before the user's and the host-load ones."""
    notes = [
        "bit_exact_* compare the owner's eager and deferred pixel_values with torch.equal "
        "(FP32, and after the cast into the BF16 tower buffer).",
        decode_note(),
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
    return notes
