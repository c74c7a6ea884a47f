"""The projection's figure: predicted total per arm against ranks, and the speedup (eager
over deferred), one line per carrier (and inter-node link speed), measured totals of the
validation reports as markers. Returns None without matplotlib (the ``plot`` extra)."""

from __future__ import annotations

from pathlib import Path
from typing import Any


def _series(totals: list[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    """Rows per line: a carrier, or a carrier at one link speed once ranks span nodes
    (single-node points belong to every link speed's line)."""
    links = sorted({r["link_gbps"] for r in totals if r["link_gbps"] is not None})
    lines: dict[str, list[dict[str, Any]]] = {}
    for tr in sorted({r["transport"] for r in totals}):
        mine = [r for r in totals if r["transport"] == tr]
        multi = [lk for lk in links if any(r["link_gbps"] == lk for r in mine)]
        for lk in multi or [None]:
            label = tr if lk is None or len(multi) < 2 else f"{tr} @ {lk:g} Gb/s"
            lines[label] = [r for r in mine if r["link_gbps"] in (None, lk)]
    return lines


def projection_figure(
    totals: list[dict[str, Any]],
    measured: list[dict[str, Any]],
    title: str,
    path: Path,
) -> Path | None:
    """``totals``: rows of :func:`kimi_bench.project.projection.totals` (lines: the
    projection's topology); ``measured``: the validation TOTAL rows (transport, ranks,
    predicted_ms, measured_ms), drawn as markers: they are on the calibration's host."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return None
    from matplotlib.ticker import NullFormatter, ScalarFormatter

    fig, (ax_t, ax_s) = plt.subplots(1, 2, figsize=(12, 4.8))
    cmap = plt.get_cmap("tab10")
    colour: dict[str, Any] = {}
    for k, (label, rows) in enumerate(_series(totals).items()):
        colour.setdefault(rows[0]["transport"], cmap(k))
        xs = [r["ranks"] for r in rows]
        for arm, style in (("eager", "--"), ("deferred", "-")):
            ys = [r.get(f"{arm}_ms") for r in rows]
            ax_t.plot(xs, ys, style, marker="o", ms=3, color=cmap(k), label=f"{label} {arm}")
        ax_s.plot(xs, [r["speedup"] for r in rows], marker="o", ms=3, color=cmap(k), label=label)
    for m in measured:
        c = colour.get(m["transport"], "black")
        ax_t.scatter([m["ranks"]], [m["measured_ms"]], marker="x", color=c, zorder=5, s=36)
        ax_t.scatter(
            [m["ranks"]],
            [m["predicted_ms"]],
            marker="o",
            facecolors="none",
            edgecolors=c,
            zorder=5,
            s=36,
        )
    if measured:
        ax_t.scatter([], [], marker="x", color="black", label="measured (one host)")
        ax_t.scatter(
            [],
            [],
            marker="o",
            facecolors="none",
            edgecolors="black",
            label="predicted for that host",
        )
    ticks = sorted({r["ranks"] for r in totals} | {m["ranks"] for m in measured})
    for ax, ylabel in ((ax_t, "total (ms, median)"), (ax_s, "speedup eager / deferred")):
        ax.set_xscale("log", base=2)
        ax.set_xticks(ticks)
        ax.xaxis.set_major_formatter(ScalarFormatter())
        ax.xaxis.set_minor_formatter(NullFormatter())
        ax.set_xlabel("ranks")
        ax.set_ylabel(ylabel)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)
    ax_t.set_yscale("log")
    ax_t.set_title("time per arm vs ranks")
    ax_s.set_title("speedup vs ranks")
    fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
