"""Module and function sizes of ``kimi_bench`` as the formatter writes them: a copy of the
package with every ``# fmt: skip`` taken out is run through ``ruff format`` (the project's
settings), then each module's lines and each function's lines (``def`` line to last line,
decorators left out; methods and nested functions counted on their own too) are read from
the AST of the formatted copy. ``python -m tests.sizes`` prints what exceeds the limits."""

from __future__ import annotations

import ast
import re
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
PACKAGE = REPO / "kimi_bench"
MAX_MODULE_LINES = 400
MAX_FUNCTION_LINES = 80

_SKIP_ALONE = re.compile(r"[ \t]*#[ \t]*fmt:[ \t]*skip[ \t]*$", re.MULTILINE)
_SKIP_BEFORE_TEXT = re.compile(r"#[ \t]*fmt:[ \t]*skip[ \t]*")


@dataclass(frozen=True)
class Sizes:
    """Formatted line counts: module path (relative to the repository) -> lines, and
    (module path, qualified function name) -> lines."""

    modules: dict[str, int]
    functions: dict[tuple[str, str], int]

    def modules_over(self, limit: int = MAX_MODULE_LINES) -> dict[str, int]:
        return {m: n for m, n in sorted(self.modules.items()) if n > limit}

    def functions_over(self, limit: int = MAX_FUNCTION_LINES) -> dict[tuple[str, str], int]:
        return {f: n for f, n in sorted(self.functions.items()) if n > limit}


def unskipped(source: str) -> str:
    """``source`` with its ``# fmt: skip`` markers taken out (a comment that goes on after
    the marker is kept)."""
    return _SKIP_BEFORE_TEXT.sub("# ", _SKIP_ALONE.sub("", source))


def _function_sizes(tree: ast.AST) -> dict[str, int]:
    out: dict[str, int] = {}

    def visit(node: ast.AST, prefix: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef):
                name = prefix + child.name
                end = child.end_lineno or child.lineno
                out[name] = max(out.get(name, 0), end - child.lineno + 1)
                visit(child, name + ".")
            elif isinstance(child, ast.ClassDef):
                visit(child, prefix + child.name + ".")
            else:
                visit(child, prefix)

    visit(tree, "")
    return out


def measure(package: Path = PACKAGE) -> Sizes:
    """Sizes of every module under ``package``, formatted with ``# fmt: skip`` removed."""
    with tempfile.TemporaryDirectory(prefix="kb-sizes-") as tmp:
        copy = Path(tmp) / package.name
        for path in package.rglob("*.py"):
            target = copy / path.relative_to(package)
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(unskipped(path.read_text()))
        shutil.copy(REPO / "pyproject.toml", Path(tmp) / "pyproject.toml")
        subprocess.run(
            [sys.executable, "-m", "ruff", "format", "--quiet", str(copy)],
            cwd=tmp,
            check=True,
        )
        modules: dict[str, int] = {}
        functions: dict[tuple[str, str], int] = {}
        for path in sorted(copy.rglob("*.py")):
            rel = str(Path(package.name) / path.relative_to(copy))
            text = path.read_text()
            modules[rel] = len(text.splitlines())
            for name, n in _function_sizes(ast.parse(text)).items():
                functions[(rel, name)] = n
    return Sizes(modules, functions)


def main() -> int:
    sizes = measure()
    over_m, over_f = sizes.modules_over(), sizes.functions_over()
    print(f"{len(sizes.modules)} modules, {sum(sizes.modules.values())} formatted lines")
    print(f"modules over {MAX_MODULE_LINES} lines: {len(over_m)}")
    for module, n in over_m.items():
        print(f"  {n:5d}  {module}")
    print(f"functions over {MAX_FUNCTION_LINES} lines: {len(over_f)}")
    for (module, name), n in over_f.items():
        print(f"  {n:5d}  {module}::{name}")
    return 1 if over_m or over_f else 0


if __name__ == "__main__":
    sys.exit(main())
