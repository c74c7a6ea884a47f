"""The table of emulated steps is rendered from the runtime profile objects
(``runtime_steps.runtime_table``), committed as ``docs/generated/runtime-table.md`` and shown
in docs/pipeline.md."""

from pathlib import Path

from kimi_bench.domain.runtime import PROFILES, get_profile, steps_table, table_profiles
from kimi_bench.domain.runtime_steps import STEP_SOURCES, runtime_table

GENERATED = Path(__file__).resolve().parents[2] / "docs" / "generated" / "runtime-table.md"
PAGE = Path(__file__).resolve().parents[2] / "docs" / "pipeline.md"


def test_the_committed_table_is_the_one_the_profiles_render():
    assert GENERATED.read_text() == steps_table(), (
        "run: python -m kimi_bench.domain.runtime > docs/generated/runtime-table.md"
    )


def test_the_pipeline_page_shows_the_runtime_table_exactly():
    assert steps_table() in PAGE.read_text()


def test_a_column_per_profile_and_a_row_per_step_each_profile_describes():
    lines = steps_table().splitlines()
    assert all(f"`{name}`" in lines[0] for name in PROFILES)
    assert len(lines) == 2 + len(STEP_SOURCES)
    assert all(set(p.steps) == {s for s, _ in STEP_SOURCES} for p in PROFILES.values())


def test_a_cell_is_the_profiles_own_text_or_same_as_the_column_before():
    pr, new, vllm = table_profiles()
    rows = {line.split(" | ")[0].lstrip("| "): line for line in steps_table().splitlines()[2:]}
    shm = rows["shm receive"]
    assert pr.steps["shm receive"] in shm and new.steps["shm receive"] in shm
    assert rows["owners"].endswith(f"| same | {vllm.steps['owners']} |")
    assert "MessageQueue.enqueue" in rows["broadcast"] and "16 MiB" in rows["broadcast"]
    assert (
        "posix_fallocate" in rows["shm wrap"]
        and "max_num_cpu_threads=1" in rows["decode a JPEG (CUDA)"]
    )
    # the table follows the profile objects: another column order renders another table
    assert runtime_table([new, pr]) != runtime_table([pr, new])
    assert get_profile("pr-33921").description.startswith("SGLang PR #33921 at its head")
