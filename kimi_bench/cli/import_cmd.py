"""``kimi-bench import``: peers' result files as a ``serve-ab`` report."""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from typing import Any

from kimi_bench.cli.build import model_command
from kimi_bench.cli.common import console, say, usage_error, verdict_lines
from kimi_bench.cli.output import write_report
from kimi_bench.options import ImportOptions

IMPORT_DOC = """Turn peers' result files into one serve-ab report (one arm per file) that
`kimi-bench gate` and `kimi-bench compare` read.

Reads sglang.bench_serving --output-file JSONL, vllm bench serve --save-result JSON,
GuideLLM's JSON report and AIPerf's JSON export (profile_export_aiperf.json). Files with
per-request data (sglang --output-details, vLLM --save-detailed, GuideLLM, AIPerf's
profile_export.jsonl with the export beside it) give one row per request (TTFT, ITL gaps,
TPOT, E2E where the file has them), and every figure the tool states (TTFT/ITL/TPOT/E2E
mean, median and percentiles, completed, failed, throughput, its peak concurrency) is
recomputed from the rows by the tool's own method and kept beside it; a summary-only file
gives the tool's figures only, and the report says so (config.per_request = false). The
load (request rate, concurrency limit, burstiness, warm-up) is carried into the report and
labels its rows: inf (a burst), 4 (requests/s), c1 (at most 1 in flight), 4/c2; a field
the file does not hold is "not recorded", never guessed.

Exit codes: 0 written, 2 unusable input (unknown or malformed file, naming the field; a
file that disagrees with itself, naming both figures: rows against the tool's summary,
percentiles out of order, E2E under TTFT or longer than the run, a request or run line
written twice, a load its own concurrency contradicts; arms that do not match the files;
one file as two arms; files at different loads, or a load one file does not record), 3
the report could not be written where asked.

Example: kimi-bench import eager.jsonl deferred.jsonl --output-dir out/imported
"""


def _import(opts: ImportOptions, _: dict[str, Any]) -> None:
    from kimi_bench.cli.tables import rich_table
    from kimi_bench.peers import PeerFormatError, build_import_report, default_arm, read_peer
    from kimi_bench.report.output import OutputError, check_output_dir
    from kimi_bench.report.view import view_of
    from kimi_bench.report.writers import write_json, write_markdown

    files, fmt, tool_version, output_dir = (
        list(opts.files),
        opts.format,
        opts.tool_version,
        opts.out,
    )
    names = list(opts.arm)
    if names and len(names) != len(files):
        raise usage_error(f"--arm given {len(names)} times for {len(files)} files")
    names = names or [default_arm(p) for p in files]
    if len(set(names)) != len(names):
        raise usage_error(f"arm names must be distinct, got {names}: name them with --arm")
    stamp = dt.datetime.now().strftime("%Y%m%d-%H%M%S")
    out = output_dir or Path("reports") / "runs" / f"import-{stamp}"
    try:
        check_output_dir(out, "--output-dir")
        runs = {name: read_peer(p, fmt) for name, p in zip(names, files, strict=True)}
        report = build_import_report(runs, tool_version)
    except (PeerFormatError, OutputError) as exc:
        raise usage_error(str(exc)) from None

    def write(folder: Path) -> list[Path]:
        folder.mkdir(parents=True, exist_ok=True)
        return [
            write_json(report, folder / "report.json"),
            write_markdown(view_of(report), folder / "report.md", "imported serve-ab"),
        ]

    result = write_report(write, out)
    cols = ["arm", "tool", "ttft_median_ms", "tool_ttft_median_ms", "ttft_p90_ms",
            "tool_ttft_p90_ms", "tool_tpot_median_ms", "tool_e2e_median_ms", "req_per_s",
            "tool_req_per_s", "completed", "failed"]  # fmt: skip
    console.print(rich_table("imported", report.results, cols))
    for line in report.notes[1:]:
        say(line, label="note:", style="dim")
    from kimi_bench.report import verdicts

    verdict_lines(verdicts.lines(report.to_dict()))
    say(f"report: {result.folder / 'report.json'}")


import_results = model_command(ImportOptions, _import, IMPORT_DOC)
