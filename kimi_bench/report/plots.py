"""Kept for imports of ``PLOT_HINT``; the figures live in ``figures.py`` (dispatch),
``figures_micro.py``, ``figures_serve.py`` and ``figures_parity.py``."""

from kimi_bench.report.figbase import PLOT_HINT
from kimi_bench.report.figures import render_figures

__all__ = ["PLOT_HINT", "render_figures"]
