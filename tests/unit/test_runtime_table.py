"""The docs' table of emulated steps (docs/pipeline.md) is generated from
``runtime.EMULATED_STEPS``."""

from pathlib import Path

from kimi_bench.domain.runtime import EMULATED_STEPS, PROFILES, steps_table

PAGE = Path(__file__).resolve().parents[2] / "docs" / "pipeline.md"


def test_the_pipeline_page_shows_the_runtime_table_exactly():
    assert steps_table() in PAGE.read_text()


def test_table_has_a_column_per_profile_and_a_row_per_step():
    header = steps_table().splitlines()[0]
    assert all(f"`{name}`" in header for name in PROFILES)
    assert len(steps_table().splitlines()) == 2 + len(EMULATED_STEPS)
    assert all(len(row) == 2 + len(PROFILES) for row in EMULATED_STEPS)
