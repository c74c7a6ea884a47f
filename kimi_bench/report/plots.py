"""PNG charts (the ``plot`` extra). Every function returns the path written, or None with
the reason when matplotlib is missing, so a run never fails for want of a chart."""

from __future__ import annotations

from pathlib import Path
from typing import Any

PLOT_HINT = "install the plot extra for charts: pip install 'kimi-bench[plot]'"


def _pyplot() -> Any:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return None
    return plt


def _finish(plt: Any, fig: Any, ax: Any, labels: tuple[str, str, str], path: Path) -> Path:
    xlabel, ylabel, title = labels
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def stage_bars(arms: dict[str, Any], stages: list[str], title: str, path: Path) -> Path | None:
    """Stacked bars of stage medians (ms), one bar per arm."""
    plt = _pyplot()
    if plt is None:
        return None
    fig, ax = plt.subplots(figsize=(8, 4.5))
    names = list(arms)
    bottoms = [0.0] * len(names)
    cmap = plt.get_cmap("tab10")
    for k, stage in enumerate(stages):
        vals = []
        for arm in names:
            st = arms[arm]["stages"][stage]
            vals.append(st["summary_ms"]["median"] if st.get("summary_ms") else 0.0)
        if not any(vals):
            continue
        ax.bar(names, vals, bottom=bottoms, label=stage, color=cmap(k % 10))
        bottoms = [b + v for b, v in zip(bottoms, vals, strict=True)]
    ax.set_ylabel("median ms (stacked by stage)")
    ax.set_title(title)
    ax.legend(fontsize=8, loc="upper right")
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def ttft_cdf(series: dict[str, list[float]], title: str, path: Path) -> Path | None:
    """Empirical CDF of TTFT (ms) per ``"arm @ rate"`` series: one colour per rate,
    dashed eager, solid deferred, log time axis."""
    plt = _pyplot()
    if plt is None:
        return None
    fig, ax = plt.subplots(figsize=(7, 4.5))
    cmap = plt.get_cmap("tab10")
    groups = sorted({label.split(" @ ")[-1] for label in series})
    for label, xs in series.items():
        if not xs:
            continue
        ys = sorted(xs)
        group = label.split(" @ ")[-1]
        ax.step(
            ys,
            [(i + 1) / len(ys) for i in range(len(ys))],
            where="post",
            label=label,
            color=cmap(groups.index(group) % 10),
            linestyle="--" if label.startswith("eager") else "-",
        )
    ax.set_xscale("log")
    return _finish(plt, fig, ax, ("TTFT (ms)", "fraction of requests", title), path)


def ttft_vs_rate(
    rates: list[str], lines: dict[str, list[float | None]], title: str, path: Path
) -> Path | None:
    """Median and p90 TTFT per arm against request rate (categorical x axis)."""
    plt = _pyplot()
    if plt is None:
        return None
    fig, ax = plt.subplots(figsize=(7, 4.5))
    for label, ys in lines.items():
        ax.plot(rates, [float("nan") if y is None else y for y in ys], marker="o", label=label)
    ax.set_yscale("log")
    return _finish(plt, fig, ax, ("request rate (req/s)", "TTFT (ms)", title), path)
