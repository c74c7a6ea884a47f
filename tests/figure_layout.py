"""What a reader sees go wrong in a figure, from matplotlib's renderer bounding boxes:
text cut by the figure's edge, a legend over the data (bars, markers, error bars, steps,
value labels) or over another legend, and tick labels in scientific notation
(``6x10^2``) on an axis of milliseconds."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np

EDGE_PX = 1.0  # tolerance at the figure's edge (anti-aliasing)


def _texts(fig: Any) -> Iterator[tuple[str, Any]]:
    if fig._suptitle is not None:
        yield "suptitle", fig._suptitle
    for t in fig.texts:
        yield "figure text", t
    for leg in fig.legends:
        yield "figure legend", leg
    for ax in fig.axes:
        if not ax.get_visible():
            continue
        for loc in ("left", "center", "right"):
            t = ax.get_title(loc=loc)
            if t:
                yield (
                    f"title {t[:40]!r}",
                    ax.title if loc == "center" else getattr(ax, f"_{loc}_title"),
                )
        yield "x label", ax.xaxis.label
        yield "y label", ax.yaxis.label
        for t in drawn_ticks(ax):
            yield f"tick {t.get_text()!r}", t
        for t in ax.texts:
            yield f"text {t.get_text()[:40]!r}", t
        if ax.get_legend() is not None:
            yield "legend", ax.get_legend()


def drawn_ticks(ax: Any) -> list[Any]:
    """The tick labels matplotlib draws (those inside the view limits, with text)."""
    out = []
    for axis in (ax.xaxis, ax.yaxis):
        for tick in axis._update_ticks():
            for label in (tick.label1, tick.label2):
                if label.get_visible() and label.get_text():
                    out.append(label)
    return out


def _inside(box: Any, fig_box: Any) -> bool:
    return (
        box.x0 >= fig_box.x0 - EDGE_PX
        and box.y0 >= fig_box.y0 - EDGE_PX
        and box.x1 <= fig_box.x1 + EDGE_PX
        and box.y1 <= fig_box.y1 + EDGE_PX
    )


def _points(artist: Any) -> np.ndarray:
    """Display coordinates of an artist's data points (lines, collections)."""
    if hasattr(artist, "get_xydata"):
        xy = np.asarray(artist.get_xydata(), dtype=float)
        if not len(xy):
            return np.empty((0, 2))
        return np.asarray(artist.get_transform().transform(xy))
    pts = []
    if hasattr(artist, "get_offsets") and len(artist.get_offsets()):
        pts.append(artist.get_offset_transform().transform(artist.get_offsets()))
    if hasattr(artist, "get_segments"):
        for seg in artist.get_segments():
            if len(seg):
                pts.append(artist.get_transform().transform(np.asarray(seg)))
    return np.concatenate(pts) if pts else np.empty((0, 2))


def _data_boxes(ax: Any, renderer: Any) -> list[tuple[str, Any]]:
    """Boxes of what the axes draws: bars and other patches, value labels."""
    out = []
    for p in ax.patches:
        if p.get_visible() and p.get_width() != 0 and p.get_height() != 0:
            out.append((f"bar at {p.get_x():.3g}", p.get_window_extent(renderer)))
    for t in ax.texts:
        if t.get_visible() and t.get_text():
            out.append((f"label {t.get_text()[:30]!r}", t.get_window_extent(renderer)))
    return out


def _data_points(ax: Any) -> list[tuple[str, np.ndarray]]:
    out = []
    for ln in ax.lines:
        if ln.get_visible() and (ln.get_label() or "").startswith("_") is not None:
            out.append((f"line {ln.get_label()!r}", _points(ln)))
    for c in ax.collections:
        if c.get_visible():
            out.append((f"collection {c.get_label()!r}", _points(c)))
    return out


def _overlaps(a: Any, b: Any) -> bool:
    return (
        a.x0 < b.x1 - EDGE_PX
        and b.x0 < a.x1 - EDGE_PX
        and a.y0 < b.y1 - EDGE_PX
        and b.y0 < a.y1 - EDGE_PX
    )


def _covered(box: Any, pts: np.ndarray) -> int:
    if not len(pts):
        return 0
    x, y = pts[:, 0], pts[:, 1]
    inside = (x > box.x0) & (x < box.x1) & (y > box.y0) & (y < box.y1)
    return int(np.count_nonzero(inside))


def _crowded(ax: Any, renderer: Any) -> list[str]:
    """Tick labels of one axis running into each other; value labels over each other."""
    out = []
    for axis in (ax.xaxis, ax.yaxis):
        labels = [t for t in drawn_ticks(ax) if t.axes is ax and t in axis.get_ticklabels(
            minor=False) + axis.get_ticklabels(minor=True)]  # fmt: skip
        boxes = [(t.get_text(), t.get_window_extent(renderer)) for t in labels]
        for i, (a, ba) in enumerate(boxes):
            for b, bb in boxes[i + 1 :]:
                if _overlaps(ba, bb):
                    out.append(f"tick labels {a!r} and {b!r} run into each other")
    texts = [(t.get_text()[:30], t.get_window_extent(renderer)) for t in ax.texts
             if t.get_visible() and t.get_text()]  # fmt: skip
    for i, (a, ba) in enumerate(texts):
        for b, bb in texts[i + 1 :]:
            if _overlaps(ba, bb):
                out.append(f"labels {a!r} and {b!r} overlap")
    return out


def layout_problems(fig: Any) -> list[str]:
    """Everything wrong with the figure's layout, as sentences (empty: reads cleanly)."""
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    fig_box = fig.bbox
    problems = []
    for what, artist in _texts(fig):
        box = artist.get_window_extent(renderer)
        if box.width > 0 and not _inside(box, fig_box):
            problems.append(f"{what} is cut by the figure's edge ({box} vs {fig_box})")
    legends = [("figure legend", leg) for leg in fig.legends]
    legends += [(f"legend of {ax.get_title()[:30]!r}", ax.get_legend()) for ax in fig.axes
                if ax.get_legend() is not None]  # fmt: skip
    for name, leg in legends:
        lbox = leg.get_window_extent(renderer)
        for ax in fig.axes:
            for what, box in _data_boxes(ax, renderer):
                if _overlaps(lbox, box):
                    problems.append(f"{name} covers {what}")
            for what, pts in _data_points(ax):
                n = _covered(lbox, pts)
                if n:
                    problems.append(f"{name} covers {n} point(s) of {what}")
        for other, leg2 in legends:
            if leg2 is not leg and _overlaps(lbox, leg2.get_window_extent(renderer)):
                problems.append(f"{name} overlaps {other}")
    for ax in fig.axes:
        problems += _crowded(ax, renderer)
        for t in drawn_ticks(ax):
            if "times" in t.get_text() or "^{" in t.get_text():
                problems.append(f"tick label {t.get_text()!r} in scientific notation")
    return sorted(set(problems))
