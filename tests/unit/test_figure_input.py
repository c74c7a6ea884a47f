"""A serve-ab report's figures are drawn from one ``ServeFigures``: its request rows are
derived once per drawing (not once per figure), and again when the report is drawn again,
so a report changed between two drawings shows the change."""

from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("matplotlib")

from kimi_bench.report import figures, figures_serve
from kimi_bench.report.model import load_report
from kimi_bench.results.serve import ServeDerived, ServeRaw

SERVE = Path(__file__).resolve().parents[2] / "reports" / "examples" / "cpu-run" / "serve-ab"


def test_serve_figures_derive_the_rows_once_per_drawing(monkeypatch: pytest.MonkeyPatch) -> None:
    derived: list[ServeRaw] = []
    real = figures_serve.derive_serve

    def counted(raw: ServeRaw) -> ServeDerived:
        derived.append(raw)
        return real(raw)

    monkeypatch.setattr(figures_serve, "derive_serve", counted)
    rep = load_report(SERVE).to_dict()
    first = figures.figures_png(rep)
    assert [f.stem for f in first] == [s.stem for s in figures_serve.FIGURES]
    assert len(derived) == 1  # four figures, one derivation
    assert {r.arm for r in derived[0].requests} == {"eager", "deferred"}

    rep["requests"] = [r for r in rep["requests"] if r["arm"] == "eager"]
    second = figures.figures_png(rep)
    assert len(derived) == 2  # drawn again: derived again, from the changed rows
    assert {r.arm for r in derived[1].requests} == {"eager"}
    by_stem = {f.stem: f.png for f in first}
    assert by_stem["ttft_cdf"] != next(f.png for f in second if f.stem == "ttft_cdf")
