"""Figures drawn from report.json data: accessors, what each figure shows, re-rendering of
committed reports."""

from __future__ import annotations

import copy
import itertools
import math
import shutil
from pathlib import Path
from typing import Any, cast

import pytest

pytest.importorskip("matplotlib")

from PIL import Image
from typer.testing import CliRunner

from kimi_bench.cli.main import app
from kimi_bench.infra.stats.format import fmt_ms
from kimi_bench.report import access, figbase, figures
from kimi_bench.report.figbase import human_bytes
from kimi_bench.report.figures_micro import (
    micro_timeline,
    stage_stats,
    stages_figure,
    timeline_figure,
)
from kimi_bench.report.figures_parity import parity_grid_figure
from kimi_bench.report.figures_serve import (
    ServeFigures,
    throughput_figure,
    ttft_vs_rate_figure,
)
from kimi_bench.report.kinds import ParityReport
from kimi_bench.report.schema import parse_report
from kimi_bench.report.tables_micro import micro_of
from kimi_bench.results.serve_rows import bootstrap_interval, readable_requests
from tests.committed import raw_report

REPO = Path(__file__).resolve().parents[2]
EXAMPLE = REPO / "reports" / "examples" / "cpu-run"
H200 = REPO / "reports" / "baselines" / "h200"


def load(path: Path) -> dict[str, Any]:
    return cast(dict[str, Any], raw_report(path))


@pytest.fixture(autouse=True)
def _close_figures() -> Any:
    yield
    plt = figbase.pyplot()
    plt.close("all")


def all_text(fig: Any) -> str:
    """Every string drawn on a figure: suptitle, figure texts, axes titles, labels, ticks,
    annotations, table cells."""
    parts = [fig._suptitle.get_text() if fig._suptitle else ""]
    parts += [t.get_text() for t in fig.texts]
    for ax in fig.axes:
        parts += [ax.get_title(), ax.get_title(loc="left"), ax.get_xlabel(), ax.get_ylabel()]
        parts += [t.get_text() for t in ax.get_xticklabels() + ax.get_yticklabels()]
        parts += [t.get_text() for t in ax.texts]
        for tbl in ax.tables:
            parts += [c.get_text().get_text() for c in tbl.get_celld().values()]
    return "\n".join(parts)


# ------------------------------------------------------------------------------ accessors


def test_caption_names_device_preset_ranks_carrier_commit() -> None:
    rep = load(H200 / "micro" / "sglang-0.5.23" / "r8-shm")
    cap = access.caption(parse_report(rep))
    for want in ("NVIDIA H200 (cuda)", "preset kimi-k3", "8 ranks", "carrier shm"):
        assert want in cap
    assert rep["environment"]["git"]["commit"][:12] in cap


def test_stage_stats_are_the_arms_blocks_the_writer_stated() -> None:
    rep = load(EXAMPLE / "micro")
    stats = stage_stats(micro_of(rep).derived)
    stated = [
        (arm, stage, st) for arm, b in rep["arms"].items() for stage, st in b["stages"].items()
    ]
    assert [(s.arm, s.stage, s.bytes) for s in stats] == [
        (arm, stage, st["bytes"]) for arm, stage, st in stated
    ]
    for s, (_, _, st) in zip(stats, stated, strict=True):
        assert s.spread is not None
        for key in ("median", "p10", "p90"):
            assert getattr(s.spread, key) == pytest.approx(st["summary_ms"][key])
    flat = copy.deepcopy(rep)
    del flat["arms"]  # a report without its arms' blocks: nothing to draw
    assert stage_stats(micro_of(flat).derived) == []


def test_timeline_fallback_is_the_median_repeat_end_to_end() -> None:
    rep = load(EXAMPLE / "micro")
    spans, per_rank = micro_timeline(micro_of(rep), "deferred")
    assert not per_rank
    totals = sorted(rep["repeats"]["deferred"], key=lambda r: r["total_ms"])
    median_rep = totals[len(totals) // 2]
    stage_sum = sum(v for v in median_rep["stage_ms"].values() if v is not None)
    assert spans[0].start_ms == 0.0
    assert spans[-1].end_ms == pytest.approx(stage_sum)
    assert all(a.end_ms == pytest.approx(b.start_ms) for a, b in itertools.pairwise(spans))


def test_serve_rates_are_categories_in_run_order() -> None:
    rep = load(H200 / "serve-ab" / "r8-shm")
    assert access.serve_rates(rep) == ["2", "8", "inf"]
    assert access.offered_rate("inf") is None
    assert access.offered_rate("8") == 8.0
    assert access.serve_rates({"summary": {"rates": [2.0, math.inf, None]}}) == [
        "2",
        "inf",
        "inf",
    ]


def test_interval_brackets_the_statistic_and_is_reproducible() -> None:
    xs = [float(x) for x in range(100)]
    lo, hi = bootstrap_interval(xs, 50) or (0, 0)
    assert lo < 49.5 < hi
    assert bootstrap_interval(xs, 50) == (lo, hi)
    assert bootstrap_interval([1.0, 2.0], 50) is None


def test_hostile_values_are_ignored_not_fatal() -> None:
    assert access.number("12") is None
    assert access.number(float("nan")) is None
    assert access.number(True) is None
    rep: dict[str, Any] = {
        "kind": "serve-ab",
        "summary": {"rates": ["2"]},
        "config": {"arms": ["eager"]},
        "requests": [{"arm": "eager", "rate": "2", "ttft_ms": "fast", "error": None}],
    }
    assert readable_requests(rep["requests"]) == []  # its TTFT is no number
    assert "no data" in all_text(ttft_vs_rate_figure(ServeFigures.of(rep)))


# -------------------------------------------------------------------------------- figures


def test_micro_stages_figure_log_axis_floor_and_bytes() -> None:
    rep = load(H200 / "micro" / "sglang-0.5.23" / "r8-shm")
    fig = stages_figure(micro_of(rep))
    totals, per_stage, per_bytes = fig.axes[:3]
    floor = rep["floor"]["floor_ms"]
    assert any(list(ln.get_ydata()) == [floor, floor] for ln in totals.lines)
    # the floor bounds a total: not drawn across the per-stage panel, whose bars are stages
    assert not any(list(ln.get_xdata()) == [floor, floor] for ln in per_stage.lines)
    assert per_stage.get_xscale() == "log" and per_bytes.get_xscale() == "log"
    # the sub-millisecond stage (eager owner_materialize) is inside the axis and labelled
    small = rep["arms"]["eager"]["stages"]["owner_materialize"]["summary_ms"]["median"]
    assert small < 1 and per_stage.get_xlim()[0] < small
    biggest = max(s["bytes"] for a in rep["arms"].values() for s in a["stages"].values())
    text = all_text(fig)
    assert "NVIDIA H200" in text and "8 ranks" in text and "carrier shm" in text
    assert fmt_ms(small, significant=True) in text and human_bytes(biggest) in text


def test_timeline_marks_the_critical_rank_when_per_rank_spans_exist() -> None:
    rep = load(EXAMPLE / "micro")
    lanes = []
    for rank, end in ((0, 5.0), (1, 9.0)):
        spans = [
            {"stage": "take_copy", "start_ms": 1.0, "end_ms": 2.0},
            {"stage": "owner_materialize", "start_ms": 2.0, "end_ms": end},
        ]
        lanes.append({"rank": rank, "spans": spans})
    rep["timeline"] = {"deferred": {"repeat": 0, "ranks": lanes}}  # only one arm has spans
    fig = timeline_figure(micro_of(rep))
    text = all_text(fig)
    assert "critical path: rank 1" in text
    ax = next(a for a in fig.axes if "deferred" in a.get_title(loc="left"))
    label = next(t for t in ax.get_yticklabels() if t.get_text() == "rank 1")
    assert label.get_color() == "crimson"
    assert "no per-rank timestamps for eager" in text  # eager has no timeline block
    for arm in rep["arms"]:
        rep["timeline"][arm] = rep["timeline"]["deferred"]
    text = all_text(timeline_figure(micro_of(rep)))
    assert "no per-rank" not in text and "one lane per rank" in text


def test_ttft_vs_rate_uses_categories_and_intervals() -> None:
    rep = load(H200 / "serve-ab" / "r8-shm")
    fig = ttft_vs_rate_figure(ServeFigures.of(rep))
    ax = fig.axes[0]
    assert [t.get_text() for t in ax.get_xticklabels()] == [
        "2 req/s",
        "8 req/s",
        "inf (all at once)",
    ]
    assert list(ax.get_xticks()) == [0, 1, 2]
    assert ax.get_yscale() == "log"
    # no line joins the categories: every marker series has no connecting line style
    assert all(ln.get_linestyle() in ("None", "") for ln in ax.lines if len(ln.get_xdata()) > 2)
    assert "95% bootstrap interval" in all_text(fig)


def test_throughput_shows_offered_and_achieved() -> None:
    rep = load(H200 / "serve-ab" / "r8-shm")
    fig = throughput_figure(ServeFigures.of(rep))
    ax = fig.axes[0]
    heights = sorted(round(p.get_height(), 3) for p in ax.patches)
    achieved = sorted(round(r["req_per_s"], 3) for r in rep["results"])
    assert heights == achieved
    offered = {tuple(seg[:, 1]) for coll in ax.collections for seg in coll.get_segments()}
    assert offered == {(2.0, 2.0), (8.0, 8.0)}


def test_parity_grid_flags_a_differing_input() -> None:
    rep = load(EXAMPLE / "parity")
    rep["results"][1]["bit_exact_bf16"] = False
    fig = parity_grid_figure(ParityReport.model_validate(rep))
    tbl = fig.axes[0].tables[0]
    cells = tbl.get_celld()
    row = 2  # header is row 0, the second input row 2
    assert cells[(row, 1)].get_text().get_text() == "DIFFERS"
    assert cells[(row, 0)].get_text().get_text() == "equal"
    assert "1 lv" in all_text(fig)  # the one-level difference vs PIL is labelled


def test_a_vllm_parity_grid_names_what_it_compared() -> None:
    """Under vllm-0.33 there is no eager vs deferred and no FP32: the grid says what was
    held against what, each row's path is vLLM's uint8 patches, and FP32 is n/a."""
    rep = load(EXAMPLE / "parity")
    rep["config"]["runtime"] = "vllm-0.33"
    rep["config"]["runtime_profile"] = {"name": "vllm-0.33", "runtime": "vllm"}
    for row in rep["results"]:
        row["bit_exact_fp32"], row["deferred"] = None, False
    fig = parity_grid_figure(ParityReport.model_validate(rep))
    assert "vllm-0.33 through the pipeline vs vLLM's path, torch.equal" in all_text(fig)
    assert "eager vs deferred" not in all_text(fig)
    cells = fig.axes[0].tables[0].get_celld()
    assert [cells[(1, c)].get_text().get_text() for c in range(3)] == [
        "n/a", "equal", "uint8 patches"]  # fmt: skip
    sglang = parity_grid_figure(ParityReport.model_validate(load(EXAMPLE / "parity")))
    assert "per-input grid (eager vs deferred, torch.equal)" in all_text(sglang)


@pytest.mark.slow
def test_render_figures_writes_the_files_of_each_kind(tmp_path: Path) -> None:
    want = {
        "micro": ["stages.png", "timeline.png", "payload.png"],
        "serve-ab": ["ttft_vs_rate.png", "throughput.png", "ttft_cdf.png", "stage_waterfall.png"],
        "parity": ["parity_grid.png"],
    }
    for kind, names in want.items():
        paths = figures.render_figures(load(EXAMPLE / kind), tmp_path / kind)
        assert [p.name for p in paths] == names
        for p in paths:
            with Image.open(p) as im:
                assert im.format == "PNG" and im.width > 600 and im.height > 150
        saved = figures.saved_figures(load(EXAMPLE / kind), tmp_path / kind)
        assert [f"{f.stem}.png" for f in saved] == names
        assert [f.png for f in saved] == [p.read_bytes() for p in paths]
    assert figures.render_figures({"kind": "run"}, tmp_path / "run") == []
    assert figures.saved_figures(load(EXAMPLE / "micro"), tmp_path / "nothing") == []
    assert not list(tmp_path.rglob(".*tmp*"))


def test_no_matplotlib_means_no_figures(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setattr(figures, "pyplot", lambda: None)
    assert figures.render_figures(load(EXAMPLE / "micro"), tmp_path) == []
    assert not figures.plot_available()


def test_render_command_redraws_a_copied_report(tmp_path: Path) -> None:
    run = tmp_path / "run"
    shutil.copytree(EXAMPLE / "parity", run / "parity")
    res = CliRunner().invoke(app, ["render", str(run), "--html", str(tmp_path / "all.html")])
    assert res.exit_code == 0, res.output
    assert (run / "parity" / "parity_grid.png").is_file()
    assert (run / "parity" / "report.html").is_file()
    assert (tmp_path / "all.html").read_text().count("data:image/png;base64,") == 1
    missing = CliRunner().invoke(app, ["render", str(tmp_path / "nope")])
    assert missing.exit_code == 2 and "no such file or folder" in missing.output
    (run / "bad").mkdir()
    (run / "bad" / "report.json").write_text("{not json")
    bad = CliRunner().invoke(app, ["render", str(run / "bad")])
    assert bad.exit_code == 2 and "not a JSON report" in bad.output


def _committed_reports() -> list[str]:
    runs = REPO / "reports" / "runs"  # local, git-ignored runs are not committed reports
    found = [p for p in figures.find_reports(REPO / "reports") if not p.is_relative_to(runs)]
    return [str(p.relative_to(REPO)) for p in found]


def test_there_are_committed_reports_to_render() -> None:
    assert len(_committed_reports()) >= 10


@pytest.mark.slow
@pytest.mark.parametrize("report", _committed_reports())  # one each: the workers share them
def test_every_committed_report_renders(tmp_path: Path, report: str) -> None:
    rep = load(REPO / report)
    out = figures.render_figures(rep, tmp_path)
    assert len(out) == len(figures.FIGURES.get(rep["kind"], ()))


def test_payload_figure_says_when_a_payload_is_not_resolved_above_zero() -> None:
    from kimi_bench.report.figures_micro import payload_figure

    rep = load(H200 / "micro" / "sglang-0.5.23" / "r8-shm")
    arm = next(iter(rep["control"]["payload"]))
    total = rep["control"]["payload"][arm]["total"]
    total["interval"] = {"low": 1.0, "high": 2.0 * max(total["payload_ms"], 1.0), "kind": "ci"}
    assert "not resolved above zero" not in all_text(payload_figure(micro_of(rep)))
    total["interval"]["low"] = -1.0  # the interval reaches zero: the bar may be noise
    assert "not resolved above zero" in all_text(payload_figure(micro_of(rep)))
