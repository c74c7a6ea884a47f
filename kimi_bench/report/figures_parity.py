"""parity figure: one row per input, one coloured cell per check."""

from __future__ import annotations

from typing import Any

from kimi_bench.report.figbase import FigureSpec, decorate, empty_figure, pyplot
from kimi_bench.report.kinds import ParityReport, ParityRow
from kimi_bench.results import has_fp32

MAX_ROWS = 60  # beyond this, failing rows first, then the rest up to the cap
_GOOD, _BAD, _NA, _INFO, _WARN = "#b7e4c7", "#f4a3a3", "#e0e0e0", "#cfe2f3", "#ffe699"
# One 8-bit level after normalization by std 0.5 is 1/127.5: a difference vs PIL up to one
# level is rounding of the reference resize; more is a visibly different resample.
_ONE_LEVEL = 1 / 127.5
COLUMNS = ("FP32 equal", "BF16 equal", "path", "max |diff| vs PIL")


def _cells(row: ParityRow, fp32: bool = True) -> list[tuple[str, str]]:
    """(text, colour) per column for one input; ``fp32``: the runtime has FP32 features
    (SGLang's eager vs deferred; without them, vLLM's one path of uint8 patches)."""

    def exact(v: bool | None) -> tuple[str, str]:
        if v is None:
            return ("n/a", _NA)
        return ("equal", _GOOD) if v else ("DIFFERS", _BAD)

    if not fp32:
        path = ("uint8 patches", "#ffffff")
    elif row.deferred is None:
        path = ("n/a", _NA)
    else:
        path = ("deferred", _INFO) if row.deferred else ("eager (kept)", "#ffffff")
    d = row.max_abs_diff_vs_pil
    if d is None:
        diff = ("n/a", _NA)
    else:
        levels = d / _ONE_LEVEL
        color = _GOOD if d == 0 else (_WARN if levels <= 1.0001 else "#f8cbad")
        diff = (f"{d:.4g} ({levels:.3g} lv)" if d else "0", color)
    return [exact(row.bit_exact_fp32), exact(row.bit_exact_bf16), path, diff]


def _pick(rows: list[ParityRow]) -> tuple[list[ParityRow], int]:
    if len(rows) <= MAX_ROWS:
        return rows, 0
    bad = [r for r in rows if r.error or r.bit_exact_fp32 is False or r.bit_exact_bf16 is False]
    rest = [r for r in rows if r not in bad]
    keep = (bad + rest)[:MAX_ROWS]
    order = {id(r): i for i, r in enumerate(rows)}
    return sorted(keep, key=lambda r: order[id(r)]), len(rows) - len(keep)


def parity_grid_figure(typed: ParityReport) -> Any:
    fp32 = has_fp32(typed.config.model_extra)  # its runtime_profile
    runtime = typed.config.runtime
    compared = "eager vs deferred" if fp32 else f"{runtime} through the pipeline vs vLLM's path"
    title = f"per-input grid ({compared}, torch.equal)"
    rows = typed.results
    if not rows:
        return empty_figure(typed, title, "the report has no inputs")
    shown, hidden = _pick(rows)
    plt = pyplot()
    row_in = 0.25  # inches per table row at font size 8, scale 1.25
    fig, ax = plt.subplots(figsize=(11, 1.5 + row_in * (len(shown) + 1)))
    ax.axis("off")
    text, colors = [], []
    for r in shown:
        if r.error:
            text.append(["error", "error", "-", r.error[:48]])
            colors.append([_BAD, _BAD, _NA, _BAD])
            continue
        cells = _cells(r, fp32)
        text.append([c[0] for c in cells])
        colors.append([c[1] for c in cells])
    labels = [f"{r.name} {r.size}".strip()[:42] for r in shown]
    table = ax.table(
        cellText=text,
        cellColours=colors,
        rowLabels=labels,
        colLabels=list(COLUMNS),
        loc="upper center",
        cellLoc="center",
        colWidths=[0.14, 0.14, 0.16, 0.2],
    )
    table.auto_set_font_size(False)
    table.set_fontsize(8)
    table.scale(1, 1.25)
    for (r, _c), cell in table.get_celld().items():
        if r == 0:
            cell.set_text_props(fontweight="bold")
    height = fig.get_figheight()
    fig.subplots_adjust(left=0.3, right=0.98, top=1 - 0.75 / height, bottom=0.7 / height)
    note = (
        f"equal = torch.equal of the owner's pixel_values (FP32; BF16 after the tower cast). "
        f"diff vs PIL is informational, in 8-bit levels (lv; 1 lv = {_ONE_LEVEL:.5f}): "
        "yellow up to one level, orange more"
    )
    if hidden:
        note += f"\n{hidden} more inputs not drawn (all equal); see report.json"
    return decorate(fig, typed, title, note)


FIGURES = (
    FigureSpec(
        "parity_grid",
        "Per-input parity grid",
        "One row per input: FP32 and BF16 bit-exactness (torch.equal), whether the input took "
        "the deferred path, and the largest difference from a PIL reference.",
        parity_grid_figure,
    ),
)
