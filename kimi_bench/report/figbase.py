"""What every figure shares: the matplotlib import (the ``plot`` extra, Agg backend), the
title and caption line (device, preset, ranks, carrier, commit), colours, saving."""

from __future__ import annotations

import io
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Generic, TypeVar

from kimi_bench.report import access
from kimi_bench.report.envelope import Header
from kimi_bench.report.writers import atomic_write_bytes

PLOT_HINT = "install the plot extra for charts: pip install 'kimi-bench[plot]'"

ARM_COLORS = {"eager": "#d95f02", "deferred": "#1b9e77", "zero-copy": "#7570b3",
              "deferred-decode": "#e7298a"}  # fmt: skip
_OTHER_ARM = "#7570b3"
DPI = 110


def pyplot() -> Any:
    """``matplotlib.pyplot`` on the Agg backend (no display needed), or None when the
    ``plot`` extra is not installed or ``KIMI_BENCH_FIGURES=0`` (the launches of
    ``kimi-bench ab``, whose figures nobody reads: seconds saved per launch)."""
    if os.environ.get("KIMI_BENCH_FIGURES") == "0":
        return None
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return None
    return plt


_PALETTE = ("#7570b3", "#e7298a", "#66a61e", "#e6ab02", "#a6761d", "#1f78b4", "#666666")


def arm_color(arm: str, index: int | None = None) -> str:
    """The arm's colour: fixed for the emulated arms; other arms (endpoint names) by their
    position among the report's arms, so two endpoints never share a colour."""
    if arm in ARM_COLORS or index is None:
        return ARM_COLORS.get(arm, _OTHER_ARM)
    return _PALETTE[index % len(_PALETTE)]


def stage_colors(stages: list[str]) -> dict[str, object]:
    """One stable colour per stage name (the same stage keeps its colour across figures)."""
    plt = pyplot()
    cmap = plt.get_cmap("tab20") if plt else None
    return {s: (cmap(i % 20) if cmap else "grey") for i, s in enumerate(stages)}


def decorate(fig: Any, header: Header, title: str, note: str = "") -> Any:
    """Title naming kind and what is drawn, caption line naming the machine and commit."""
    import textwrap

    fig.suptitle(f"{header.kind}: {title}", fontsize=12, fontweight="bold")
    per_line = int(fig.get_figwidth() * 16)  # 7.5 pt characters per inch, about
    line = "\n".join(textwrap.wrap(access.caption(header), per_line))
    if note:
        line += "\n" + "\n".join(textwrap.wrap(note, per_line))
    fig.text(0.01, 0.005, line, fontsize=7.5, color="#444444", ha="left", va="bottom")
    return fig


def plain_number(v: float) -> str:
    """A tick value as a reader writes it: ``600``, ``2000``, ``0.05`` (never ``6x10^2``)."""
    import numpy as np

    if v == 0:
        return "0"
    if abs(v) >= 1:
        return f"{v:,.0f}" if abs(v) >= 10_000 else np.format_float_positional(v, trim="-")
    return np.format_float_positional(float(f"{v:.3g}"), trim="-")


def plain_log_axis(axis: Any) -> None:
    """Plain numbers on a log axis: decades labelled (``100``, ``1000``) and, where the axis
    spans fewer than three decades, the 2x and 5x minor ticks too (``200``, ``500``)."""
    import math

    from matplotlib.ticker import FuncFormatter, LogLocator

    low, high = sorted(axis.get_view_interval())
    decades = math.log10(high / low) if low > 0 and high > 0 else 10.0
    axis.set_major_locator(LogLocator(base=10))
    axis.set_major_formatter(FuncFormatter(lambda v, _pos: plain_number(v)))
    if decades < 3:
        subs = (2.0, 3.0, 5.0) if decades < 1.3 else (2.0, 5.0)
        axis.set_minor_locator(LogLocator(base=10, subs=subs))
        axis.set_minor_formatter(FuncFormatter(lambda v, _pos: plain_number(v)))
    else:
        axis.set_minor_formatter(FuncFormatter(lambda _v, _pos: ""))


def inches(fig: Any, value: float) -> float:
    """``value`` inches as a fraction of the figure's height (layouts in fixed inches:
    legends and the caption keep their size whatever the figure's)."""
    return value / fig.get_figheight()


def human_bytes(n: float) -> str:
    """1536 -> '1.5 KiB'; 0 -> '0 B'."""
    v = float(n)
    if abs(v) < 1024:
        return f"{v:.0f} B"
    units = ("KiB", "MiB", "GiB", "TiB")
    k = 0
    v /= 1024
    while abs(v) >= 1024 and k < len(units) - 1:
        v /= 1024
        k += 1
    return f"{v:.3g} {units[k]}"


def png_bytes(fig: Any) -> bytes:
    plt = pyplot()
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=DPI)
    if plt is not None:
        plt.close(fig)
    return buf.getvalue()


def empty_figure(header: Header, title: str, why: str) -> Any:
    """A small figure that says why there is nothing to draw (kept, so a reader is not
    left guessing why a chart is missing)."""
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(7, 2.2))
    ax.axis("off")
    ax.text(0.5, 0.5, f"no data: {why}", ha="center", va="center", fontsize=11)
    fig.subplots_adjust(top=0.78, bottom=0.22)
    return decorate(fig, header, title)


T = TypeVar("T")


@dataclass(frozen=True)
class FigureSpec(Generic[T]):
    """One figure of a report kind: file stem, heading, what it shows, how to build it
    (from the report's JSON dict, or from what its kind reads of it once: ``figures``)."""

    stem: str
    title: str
    about: str
    build: Callable[[T], Any]


@dataclass(frozen=True)
class RenderedFigure:
    stem: str
    title: str
    about: str
    png: bytes

    def save(self, out_dir: Path) -> Path:
        return atomic_write_bytes(out_dir / f"{self.stem}.png", self.png)
