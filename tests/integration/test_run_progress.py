"""``kimi-bench run`` piped (as in CI): progress lines reach stderr while the run is
still going, naming the part and the steps, with an estimate at the start and the time
taken at the end. Read through a real pipe from a subprocess (the shared ``tiny_run``);
no timing is asserted."""

from __future__ import annotations

import pytest

from tests.conftest import TinyRun

pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("tiny_run")]


def test_piped_run_prints_progress_before_it_ends(tiny_run: TinyRun):
    lines = [line for line, _ in tiny_run.lines]
    seen_running = [line.strip() for line, running in tiny_run.lines
                    if running and line.startswith("run: ")]  # fmt: skip
    text = "\n".join(lines)
    assert tiny_run.code in (0, 1), text[-3000:]
    assert lines and lines[0].startswith("run: parity, micro, serve-ab, gate and index; estimate ~")
    # plain progress lines arrived while the process was still running, for every part
    for part in ("parity", "micro", "serve-ab", "gate and index"):
        assert any(s.startswith(f"run: {part}") for s in seen_running), (part, text[-3000:])
    assert any(" repeats" in s and "elapsed" in s and "left" in s for s in seen_running)
    assert any(line.startswith("run: done in ") and "(estimate " in line for line in lines)
    assert "\x1b[" not in text  # a pipe gets plain text, no terminal codes
