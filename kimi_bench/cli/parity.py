"""``kimi-bench parity``: options from ``options.ParityOptions``, rendering here."""

from __future__ import annotations

from typing import Any

import typer

from kimi_bench.cli.build import build, command, given, option_params, output_params
from kimi_bench.cli.common import fail_line, note, say, usage_error, verdict_lines
from kimi_bench.cli.output import append_jsonl, resolve_output, write_report
from kimi_bench.options import ParityOptions

DOC = """Are eager and deferred features bit-identical on these images, and why was each
image deferred or not?

Runs both arms through the one pipeline (eager: preprocess at the producer, FP32 to every
rank; deferred: the policy decides per request or per image, uint8 to the owner,
materialized there) and compares the owner's pixel_values with torch.equal in FP32 and
after the cast into the BF16 tower buffer.

Exit codes: 0 all accepted inputs identical, 1 any differs, 2 usage error or no usable
input. Example: kimi-bench parity --images ~/photos --device cuda --output-dir parity-out
"""

COLUMNS = ["input", "WxH", "mode", "defer", "grid", "owner", "fp32", "bf16", "vs PIL", "error"]
REFERENCE_COLUMNS = ["sglang"]


def _rows(results: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [
        {
            "input": r["name"],
            "WxH": f"{r['width']}x{r['height']}" if r["width"] else None,
            "mode": r["mode"],
            "defer": r["deferred"],
            "grid": r["grid_thw"],
            "owner": r["owner_rank"],
            "fp32": r["bit_exact_fp32"],
            "bf16": r["bit_exact_bf16"],
            "vs PIL": r["max_abs_diff_vs_pil"],
            "error": r["error"],
            **({"sglang": _ref_cell(r)} if "reference_identical" in r else {}),
        }
        for r in results
    ]


VLLM_COLUMNS = ["input", "WxH", "vLLM WxH", "grid", "tokens", "SGLang tokens", "bf16",
                "vs SGLang", "vs PIL", "vllm", "error"]  # fmt: skip


def _vllm_rows(results: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """vllm-0.33's rows: its size, grid and tokens beside SGLang's, and the verdicts."""
    return [
        {
            "input": r["name"],
            "WxH": f"{r['width']}x{r['height']}" if r["width"] else None,
            "vLLM WxH": "x".join(map(str, r["vllm_size"])) if r.get("vllm_size") else None,
            "grid": r["grid_thw"],
            "tokens": r["num_tokens"],
            "SGLang tokens": r.get("sglang_tokens"),
            "bf16": r["bit_exact_bf16"],
            "vs SGLang": r.get("vs_sglang_max_abs"),
            "vs PIL": r["max_abs_diff_vs_pil"],
            "vllm": _vllm_ref_cell(r.get("reference_identical")),
            "error": r["error"],
        }
        for r in results
    ]


def _vllm_ref_cell(identical: bool | None) -> str | None:
    return None if identical is None else "identical" if identical else "DIFFERS"


def _reference(opts: ParityOptions) -> Any:
    """The runtime ``--reference`` names, loaded (a usage error with the install hint when
    it cannot be); None for pil and none."""
    if opts.reference == "sglang":  # imported only when asked for
        from kimi_bench.sglang_ref import SglangUnavailable, load_runtime

        try:
            return load_runtime()
        except SglangUnavailable as exc:
            raise usage_error(str(exc)) from None
    if opts.reference == "vllm":
        from kimi_bench.vllm_ref import VllmMissingError, VllmVersionError, load

        try:
            return load()
        except (VllmMissingError, VllmVersionError) as exc:
            raise usage_error(str(exc)) from None
    return None


def _ref_cell(r: dict[str, Any]) -> str:
    if r.get("reference_identical"):
        return "identical"
    from kimi_bench.bench.parity_reference import runtime_refused

    return "runtime refuses" if runtime_refused(r) else "DIFFERS"


def _body(values: dict[str, Any]) -> None:
    # options first, with no torch import: a usage error comes back at once
    from kimi_bench.domain.config import ConfigError, resolve_config
    from kimi_bench.options import OptionsError

    try:
        opts = build(ParityOptions, given(values, ParityOptions))
        cfg = resolve_config(opts.preset, opts.config)
        from kimi_bench.infra.environment import resolve_device  # imports torch

        resolve_device(opts.device)  # a missing CUDA device is a usage error, before any work
        from kimi_bench.bench.parity_outputs import check_not_inputs

        check_not_inputs(opts.images, values.get("out"), opts.dump)
        out_dir, fmt = resolve_output(values, "parity")  # claimed only for a usable run
    except (OptionsError, ConfigError, ValueError) as exc:
        raise usage_error(str(exc)) from None
    from kimi_bench.bench.parity import exit_code, run_parity
    from kimi_bench.cli.tables import show_tables
    from kimi_bench.domain.corpus_files import InputError
    from kimi_bench.report.emit import emit_parity

    runtime = _reference(opts)
    try:
        from kimi_bench.bench.estimate import parity_s
        from kimi_bench.cli.progress import JobProgress

        dev = resolve_device(opts.device).type
        with JobProgress("parity", [("parity", parity_s(opts, dev))]) as progress:
            progress.part("parity", 0, "inputs")

            def tick(name: str, done: int, total: int) -> None:
                progress.step(done, total, item=name)

            report = run_parity(
                opts,
                progress=tick,
                cfg=cfg,
                reference_runtime=runtime,
                overwrite=bool(values.get("overwrite")),
            )
    except (InputError, ValueError) as exc:
        raise usage_error(str(exc)) from None
    written = write_report(lambda d: emit_parity(report, d), out_dir)
    out_dir = written.folder
    if report.summary.get("tokens_differ_from_sglang") is not None:  # vllm-0.33's parity
        title = f"parity ({opts.runtime} through the pipeline vs vLLM's path, torch.equal)"
        show_tables([(title, _vllm_rows(report.results), VLLM_COLUMNS)], fmt)
    else:
        cols = COLUMNS + (REFERENCE_COLUMNS if opts.reference == "sglang" else [])
        title = "parity (eager vs deferred, torch.equal)"
        show_tables([(title, _rows(report.results), cols)], fmt, formats={"defer": "choice"})
    for line in report.notes:
        note(line)
    code = exit_code(report)
    from kimi_bench.report import verdicts
    from kimi_bench.report.output import EXIT_OUTPUT_INCOMPLETE

    verdict_lines(verdicts.lines(report.to_dict()))
    jsonl = append_jsonl(values, report, out_dir)
    if report.data.get("dump_error"):  # the dumps asked for are not all there
        fail_line(report.data["dump_error"])
        jsonl = max(jsonl, EXIT_OUTPUT_INCOMPLETE)
    say(f"report: {out_dir / 'report.json'}", err=True)
    raise typer.Exit(code=max(code, written.exit_code, jsonl))


parity = command(option_params(ParityOptions) + output_params(), _body, DOC)
