"""One-lie variants of the peers' honest files (``tests.peers.fixtures``): each lie is one
edit of the files a tool wrote for one run, with the words ``kimi-bench import`` must
refuse it with (exit 2). ``ab`` lies are refused when the file is imported beside an
honest file of the same load (a load the file does not record cannot be shown equal)."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tests.peers import fixtures as fx

Files = dict[str, Any]  # file name -> the object(s) it holds


@dataclass(frozen=True)
class Lie:
    id: str
    tool: str
    load: str
    edit: Callable[[Files], None]
    says: str
    failed: int = 0
    ab: bool = False  # refused as one arm of two
    vllm_metrics: str = "ttft,tpot,itl"


def _main(tool: str) -> str:
    return fx.NAMES[tool]


def files_for(lie: Lie, seed: int = 1) -> tuple[fx.Run, Files]:
    run = fx.make_run(lie.load, failed=lie.failed, seed=seed)
    if lie.tool.startswith("vllm"):
        obj: Any = fx.vllm(run, detailed=lie.tool == "vllm", metrics=lie.vllm_metrics)
    else:
        obj = fx.honest(lie.tool, run)
    files = {_main(lie.tool): obj}
    if lie.tool == "aiperf-records":
        files[fx.NAMES["aiperf"]] = fx.honest("aiperf", run)
    return run, files


def write_lie(lie: Lie, folder: Path) -> Path:
    """The lying file (and the files beside it) in ``folder``; the path to import."""
    _, files = files_for(lie)
    lie.edit(files)
    for name, obj in files.items():
        if obj is not None:
            fx.dump(obj, folder / name)
    return folder / _main(lie.tool)


def write_twin(lie: Lie, folder: Path) -> Path:
    """An honest file of the same tool and load (another run) for ``ab`` lies."""
    _, files = files_for(Lie(lie.id, lie.tool, lie.load, _keep, "", lie.failed), seed=7)
    for name, obj in files.items():
        fx.dump(obj, folder / name)
    return folder / _main(lie.tool)


def _keep(files: Files) -> None:
    return None


# ---------------------------------------------------------------------------------- edits


def _set(tool: str, **values: Any) -> Callable[[Files], None]:
    def edit(files: Files) -> None:
        files[_main(tool)].update(values)

    return edit


def _scale(tool: str, keys: tuple[str, ...], by: float) -> Callable[[Files], None]:
    def edit(files: Files) -> None:
        obj = files[_main(tool)]
        for k in keys:
            obj[k] = [x * by for x in obj[k]] if isinstance(obj[k], list) else obj[k] * by

    return edit


def _drop(tool: str, *keys: str) -> Callable[[Files], None]:
    def edit(files: Files) -> None:
        for k in keys:
            files[_main(tool)].pop(k)

    return edit


def _with(tool: str, f: Callable[[dict[str, Any]], None]) -> Callable[[Files], None]:
    def edit(files: Files) -> None:
        f(files[_main(tool)])

    return edit


def _twice(tool: str) -> Callable[[Files], None]:
    def edit(files: Files) -> None:
        files[_main(tool)] = [files[_main(tool)], json.loads(json.dumps(files[_main(tool)]))]

    return edit


def _dup_row(o: dict[str, Any]) -> None:
    """The first request written twice, every count fixed to match."""
    for k in (
        "input_lens",
        "output_lens",
        "ttfts",
        "itls",
        "generated_texts",
        "errors",
        "latencies",
        "start_times",
        "queue_times",
    ):
        if k in o:
            o[k].append(o[k][0])
    o["completed"] += 1
    if "num_prompts" in o:
        o["num_prompts"] += 1


def _sg_unfail(o: dict[str, Any]) -> None:
    o["errors"] = ["" for _ in o["errors"]]  # the failed requests shown as served


def _median_over_p99(o: dict[str, Any]) -> None:
    o["median_ttft_ms"] = o["p99_ttft_ms"] * 1.5


def _e2e_under_ttft(o: dict[str, Any]) -> None:
    o["median_e2e_latency_ms"] = o["median_ttft_ms"] * 0.5


def _latency_under_ttft(o: dict[str, Any]) -> None:
    o["latencies"][0] = o["ttfts"][0] * 0.5


def _gl(f: Callable[[dict[str, Any]], None]) -> Callable[[Files], None]:
    return _with("guidellm", lambda o: f(o["benchmarks"][0]))


def _gl_ttft_stat(stat: str, by: float) -> Callable[[dict[str, Any]], None]:
    def f(b: dict[str, Any]) -> None:
        s = b["metrics"]["time_to_first_token_ms"]["successful"]
        if stat == "median":
            s["median"] = s["percentiles"]["p50"] = s["percentiles"]["p99"] * by
        else:
            s["percentiles"][stat] *= by

    return f


def _gl_requests(f: Callable[[dict[str, Any]], None]) -> Callable[[dict[str, Any]], None]:
    def g(b: dict[str, Any]) -> None:
        for r in b["requests"]["successful"]:
            f(r)

    return g


def _gl_dup(b: dict[str, Any]) -> None:
    b["requests"]["successful"].append(json.loads(json.dumps(b["requests"]["successful"][0])))
    b["metrics"]["request_totals"]["successful"] += 1


def _gl_unerror(b: dict[str, Any]) -> None:
    b["requests"]["errored"] = []  # request_totals.errored kept at 3


def _ai(f: Callable[[dict[str, Any]], None], name: str = "aiperf") -> Callable[[Files], None]:
    def edit(files: Files) -> None:
        f(files[fx.NAMES["aiperf"]] if name == "export" else files[_main(name)])

    return edit


def _rec(f: Callable[[list[dict[str, Any]]], None]) -> Callable[[Files], None]:
    def edit(files: Files) -> None:
        f(files[fx.NAMES["aiperf-records"]])

    return edit


def _rec_metric(name: str, by: float = 1.0, unit: str | None = None) -> Callable[[Files], None]:
    def f(recs: list[dict[str, Any]]) -> None:
        m = recs[0]["metrics"][name]
        m["value"] *= by
        if unit is not None:
            m["unit"] = unit

    return _rec(f)


def _rec_dup(files: Files) -> None:
    recs = files[fx.NAMES["aiperf-records"]]
    recs.append(json.loads(json.dumps(recs[0])))
    files[fx.NAMES["aiperf"]]["request_count"]["avg"] += 1


def _rec_e2e_under_ttft(recs: list[dict[str, Any]]) -> None:
    m = recs[0]["metrics"]
    m["request_latency"]["value"] = m["time_to_first_token"]["value"] * 0.5


def _ai_burst_as_c1(files: Files) -> None:
    ex = files[fx.NAMES["aiperf"]]
    ex["input_config"]["phases"][0]["concurrency"] = 1
    ex["effective_concurrency"]["max"] = 1.0


def _ai_errors_dropped(ex: dict[str, Any]) -> None:
    ex.pop("error_request_count")
    ex["error_summary"] = []


def _ai_median_over_p99(ex: dict[str, Any]) -> None:
    ex["time_to_first_token"]["p50"] = ex["time_to_first_token"]["p99"] * 1.5


def _ai_ttft_over_e2e(ex: dict[str, Any]) -> None:
    ex["time_to_first_token"]["p50"] = ex["request_latency"]["p50"] * 1.2
    ex["time_to_first_token"]["p90"] = max(
        ex["time_to_first_token"]["p90"], ex["time_to_first_token"]["p50"]
    )
    ex["time_to_first_token"]["p95"] = max(
        ex["time_to_first_token"]["p95"], ex["time_to_first_token"]["p90"]
    )
    ex["time_to_first_token"]["p99"] = max(
        ex["time_to_first_token"]["p99"], ex["time_to_first_token"]["p95"]
    )


def _ai_no_phases(ex: dict[str, Any]) -> None:
    ex["input_config"].pop("phases")


def _unit(name: str, unit: str) -> Callable[[dict[str, Any]], None]:
    def f(ex: dict[str, Any]) -> None:
        ex[name]["unit"] = unit

    return f


def _scale_in(name: str, key: str, by: float) -> Callable[[dict[str, Any]], None]:
    def f(ex: dict[str, Any]) -> None:
        ex[name][key] *= by

    return f


def _records_alone(files: Files) -> None:
    files[fx.NAMES["aiperf"]] = None  # the records without the export beside them
