"""The projection's figure, drawn from a ``project`` report's data like every kind's:
predicted total per arm against ranks, and the speedup (eager over deferred), one line
per carrier (and inter-node link speed), measured totals of the validation reports as
markers."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

from pydantic import AliasPath, BeforeValidator, Field

from kimi_bench.report.envelope import Header, Loose, Open
from kimi_bench.report.figbase import (
    FigureSpec,
    decorate,
    empty_figure,
    inches,
    plain_log_axis,
    pyplot,
)


class Point(Open):
    """A row of ``totals`` (projected) or of ``validation.totals`` (measured on the
    calibration's host), as the figure draws it."""

    transport: str
    ranks: int
    link_gbps: float | None = None
    eager_ms: float | None = None
    deferred_ms: float | None = None
    speedup: float | None = None
    predicted_ms: float | None = None
    measured_ms: float | None = None


def _records(rows: object) -> list[object]:
    return [r for r in rows if isinstance(r, dict)] if isinstance(rows, list) else []


Points = Annotated[list[Point], BeforeValidator(_records)]


class Projection(Header):
    """What the figure reads of a ``project`` report (``figures.figure_input``): the
    projected totals, the validation's measured ones, the calibration."""

    totals: Points = Field(default_factory=list)
    measured: Points = Field(
        default_factory=list, validation_alias=AliasPath("validation", "totals")
    )
    calibration: Loose[list[Any]] = Field(None, validation_alias=AliasPath("config", "calibration"))
    gpus_per_node: Any = Field(None, validation_alias=AliasPath("config", "gpus_per_node"))


def _series(totals: list[Point]) -> dict[str, list[Point]]:
    """Rows per line: a carrier, or a carrier at one link speed once ranks span nodes
    (single-node points belong to every link speed's line)."""
    links = sorted({r.link_gbps for r in totals if r.link_gbps is not None})
    lines: dict[str, list[Point]] = {}
    for tr in sorted({r.transport for r in totals}):
        mine = [r for r in totals if r.transport == tr]
        multi: list[float | None] = [lk for lk in links if any(r.link_gbps == lk for r in mine)]
        for lk in multi or [None]:
            label = tr if lk is None or len(multi) < 2 else f"{tr} @ {lk:g} Gb/s"
            lines[label] = [r for r in mine if r.link_gbps in (None, lk)]
    return lines


def projection_figure(p: Projection) -> Any:
    """``totals``: the projection's rows (lines: its topology); ``validation.totals``: the
    validation TOTAL rows (transport, ranks, predicted_ms, measured_ms), drawn as markers:
    they are on the calibration's host."""
    totals, measured = p.totals, p.measured
    title = "projected totals and speedup against ranks"
    if not totals:
        return empty_figure(p, title, "the report has no projected totals")
    plt = pyplot()
    from matplotlib.ticker import NullFormatter, ScalarFormatter

    fig, (ax_t, ax_s) = plt.subplots(1, 2, figsize=(12, 5.6))
    cmap = plt.get_cmap("tab10")
    colour: dict[str, Any] = {}
    for k, (label, rows) in enumerate(_series(totals).items()):
        colour.setdefault(rows[0].transport, cmap(k))
        xs = [r.ranks for r in rows]
        for arm, style, ys in (("eager", "--", [r.eager_ms for r in rows]),
                               ("deferred", "-", [r.deferred_ms for r in rows])):  # fmt: skip
            ax_t.plot(xs, ys, style, marker="o", ms=3, color=cmap(k), label=f"{label} {arm}")
        ax_s.plot(xs, [r.speedup for r in rows], marker="o", ms=3, color=cmap(k), label=label)
    for m in measured:
        c = colour.get(m.transport, "black")
        ax_t.scatter([m.ranks], [m.measured_ms], marker="x", color=c, zorder=5, s=36)
        ax_t.scatter([m.ranks], [m.predicted_ms], marker="o", facecolors="none",
                     edgecolors=c, zorder=5, s=36)  # fmt: skip
    if measured:
        ax_t.scatter([], [], marker="x", color="black", label="measured (one host)")
        ax_t.scatter([], [], marker="o", facecolors="none", edgecolors="black",
                     label="predicted for that host")  # fmt: skip
    ticks = sorted({r.ranks for r in totals} | {m.ranks for m in measured})
    for ax, ylabel in ((ax_t, "total (ms, median)"), (ax_s, "speedup eager / deferred")):
        ax.set_xscale("log", base=2)
        ax.set_xticks(ticks)
        ax.xaxis.set_major_formatter(ScalarFormatter())
        ax.xaxis.set_minor_formatter(NullFormatter())
        ax.set_xlabel("ranks")
        ax.set_ylabel(ylabel)
        ax.grid(alpha=0.3)
    ax_t.set_yscale("log")
    plain_log_axis(ax_t.yaxis)
    ax_t.set_title("time per arm vs ranks", fontsize=9)
    ax_s.set_title("speedup vs ranks", fontsize=9)
    handles, labels = ax_t.get_legend_handles_labels()
    lines = -(-len(labels) // 4)
    fig.tight_layout(rect=(0, inches(fig, 0.6 + 0.2 * lines), 1, 1 - inches(fig, 0.4)))
    fig.legend(handles, labels, fontsize=7.5, loc="lower center", ncol=4,
               bbox_to_anchor=(0.5, inches(fig, 0.35)))  # fmt: skip
    cals = ", ".join(Path(str(c)).name for c in p.calibration or [])
    note = f"calibrated on {cals}; {p.gpus_per_node} GPUs per node beyond one node"
    return decorate(fig, p, title, note)


FIGURES: tuple[FigureSpec[Projection], ...] = (
    FigureSpec(
        "projection",
        "Projection",
        "Predicted total per arm and the speedup against ranks; x: measured, o: predicted.",
        projection_figure,
    ),
)
