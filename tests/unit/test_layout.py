"""Module and function sizes of ``kimi_bench``, counted as ``ruff format`` writes the code
with every ``# fmt: skip`` taken out (``tests/sizes.py``; ``python -m tests.sizes`` lists
the offenders): no module over 400 lines, no function over 80."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.sizes import MAX_FUNCTION_LINES, MAX_MODULE_LINES, REPO, Sizes, measure, unskipped

# Modules over the limit that another line of work owns, at most this long until it splits
# them (remove the entry then): growing one fails too.
KNOWN_OVER: dict[str, int] = {
    "kimi_bench/pipeline/steps.py": 423,  # the pipeline's steps (the runtime work)
}


@pytest.fixture(scope="module")
def sizes() -> Sizes:
    return measure()


def test_every_module_is_measured(sizes: Sizes) -> None:
    on_disk = {str(p.relative_to(REPO)) for p in (REPO / "kimi_bench").rglob("*.py")}
    assert set(sizes.modules) == on_disk
    assert any(n > 0 for n in sizes.functions.values())


def test_no_module_over_the_limit(sizes: Sizes) -> None:
    over = sizes.modules_over(MAX_MODULE_LINES)
    unexpected = {m: n for m, n in over.items() if n > KNOWN_OVER.get(m, MAX_MODULE_LINES)}
    assert unexpected == {}, (
        f"modules over {MAX_MODULE_LINES} formatted lines (split them by responsibility): "
        f"{unexpected}"
    )
    fixed = [m for m in KNOWN_OVER if m not in over]
    assert fixed == [], f"now within the limit: remove them from KNOWN_OVER: {fixed}"


def test_no_function_over_the_limit(sizes: Sizes) -> None:
    over = sizes.functions_over(MAX_FUNCTION_LINES)
    assert over == {}, f"functions over {MAX_FUNCTION_LINES} formatted lines: {over}"


def test_sizes_are_counted_on_formatter_output_without_fmt_skip(tmp_path: Path) -> None:
    """A line kept compact by ``# fmt: skip`` counts as the formatter would write it, and a
    module or function over the limit is found."""
    pkg = tmp_path / "pkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "small.py").write_text(
        "def f(a, b): return {'a': a, 'b': b}  # fmt: skip\n"
        "X = [1,\n     2]  # fmt: skip  (a comment kept)\n"
    )
    long_body = "".join(f"    x{i} = {i}\n" for i in range(MAX_FUNCTION_LINES))
    (pkg / "big.py").write_text("def long():\n" + long_body + "\n\n" + "Y = 0\n" * MAX_MODULE_LINES)
    got = measure(pkg)
    assert got.functions[("pkg/small.py", "f")] == 2  # body on a line of its own
    assert got.modules["pkg/small.py"] == 5  # def, body, two blank lines, the list on one
    assert got.functions_over() == {("pkg/big.py", "long"): MAX_FUNCTION_LINES + 1}
    assert list(got.modules_over()) == ["pkg/big.py"]
    assert unskipped("x = 1  # fmt: skip  (why)\n") == "x = 1  # (why)\n"
