"""``parity --reference sglang``: merge the installed runtime's verdicts into parity rows.

The comparison itself lives in ``kimi_bench.sglang_ref`` (it calls the runtime's own
functions); this module only folds its ``reference_*`` columns into the parity report and
summarises them. An input the runtime itself refuses (it raises where kimi-bench follows
SPEC) is listed apart from a value difference: the first is a runtime limitation, the
second a mismatch that fails the run.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch

from kimi_bench.domain.config import PreprocessConfig
from kimi_bench.domain.corpus import CorpusEntry
from kimi_bench.domain.runtime import get_profile
from kimi_bench.options import ParityOptions
from kimi_bench.report.model import Report


def runtime_refused(row: dict[str, Any]) -> bool:
    """Every problem of the row is the runtime raising on an input kimi-bench accepts."""
    detail = row.get("reference_error") or ""
    problems = [p for p in detail.split("; ") if p]
    return bool(problems) and all("sglang raised" in p for p in problems)


def merge_reference(
    opts: ParityOptions,
    cfg: PreprocessConfig,
    entries: Sequence[CorpusEntry],
    rows: list[dict[str, Any]],
    device: torch.device,
    runtime: Any,
) -> dict[str, Any]:
    """Add the ``reference_*`` columns to ``rows`` (by input name); returns the summary
    block for the report."""
    from kimi_bench.sglang_ref import REFERENCE_KEYS, reference_metadata, reference_rows

    ref = reference_rows(
        entries,
        cfg,
        device,
        policy=opts.policy or get_profile(opts.runtime_spec).decision_scope,
        images_per_request=opts.images_per_request,
        batch_size=opts.batch_size,
        runtime=runtime,
    )
    by_name = {r["name"]: r for r in ref}
    for row in rows:
        theirs = by_name.get(row["name"], {})
        row.update({k: theirs.get(k) for k in REFERENCE_KEYS})
    refused = [r["name"] for r in rows if r.get("reference_identical") is False
               and runtime_refused(r)]  # fmt: skip
    differ = [r for r in rows if r.get("reference_identical") is False and r["name"] not in refused
              and r.get("error") is None]  # fmt: skip
    first = differ[0] if differ else None
    return {
        **reference_metadata(runtime, cfg),
        "identical": sum(1 for r in rows if r.get("reference_identical")),
        "runtime_refused": refused,
        "differing": [r["name"] for r in differ],
        "first_difference": (
            f"{first['name']}: {first.get('reference_detail') or 'differs'}" if first else None
        ),
    }


def apply_reference(
    report: Report,
    opts: ParityOptions,
    cfg: PreprocessConfig,
    entries: list[CorpusEntry],
    rows: list[dict[str, Any]],
    rank_dev: torch.device,
    reference_runtime: Any,
) -> None:
    """``--reference sglang``: fold the runtime's verdicts into the rows, notes and verdict."""
    if reference_runtime is None:
        from kimi_bench.sglang_ref import load_runtime

        reference_runtime = load_runtime()
    ref = merge_reference(opts, cfg, entries, rows, rank_dev, reference_runtime)
    report.summary["reference"] = ref
    report.notes += [
        f"--reference sglang: held against sglang {ref['sglang_version']} "
        f"({ref['sglang_location']}): {ref['identical']} inputs identical to the runtime "
        "(plan, decision, eager and deferred FP32/BF16 by torch.equal).",
        *(ref.get("notes") or []),
    ]
    if ref["runtime_refused"]:
        report.notes.append(
            "the runtime itself raises on: "
            + ", ".join(ref["runtime_refused"])
            + " (kimi-bench follows SPEC there; see each row's reference_detail)"
        )
    if ref["differing"]:
        report.summary["verdict"] = f"DIFFERS FROM SGLANG: {ref['first_difference']}"
    else:
        report.summary["verdict"] += (
            f"; identical to sglang {ref['sglang_version']} on every input it accepts"
        )
