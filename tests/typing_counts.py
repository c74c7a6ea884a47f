"""How typed the results side is (issue 41), read from the AST of ``report/``, ``ci/``,
``project/`` and ``peers/``: functions with a parameter or the return left unannotated,
functions whose signature is untyped data (``dict[str, Any]``, ``Mapping[str, Any]``, a
``Dict`` alias of them: the issue's measure; bare ``Any`` apart), and ``.get("...")``
calls. Peers' file parsers (``peers/formats.py``, ``peers/aiperf.py``,
``peers/guidellm.py``) and the schema migration (``report/migrate.py``) read outside
formats by key and are counted apart. ``python -m tests.typing_counts`` prints the counts
and the unannotated functions."""

from __future__ import annotations

import ast
import sys
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
PACKAGES = ("report", "ci", "project", "peers")
EXCEPTED = {
    "kimi_bench/peers/formats.py",
    "kimi_bench/peers/aiperf.py",
    "kimi_bench/peers/guidellm.py",
    "kimi_bench/report/migrate.py",
}
MAPPINGS = {"dict", "Mapping", "MutableMapping"}


@dataclass
class Counts:
    unannotated: list[str] = field(default_factory=list)  # module:line name
    untyped_data: list[str] = field(default_factory=list)  # dict[str, Any] and the like
    bare_any: list[str] = field(default_factory=list)  # a parameter or return of type Any
    gets: int = 0


def _any_data(ann: ast.expr | None) -> bool:
    """A ``Dict`` alias, or ``dict``/``Mapping`` with ``Any`` values, anywhere in the
    annotation (``list[Dict]``, ``dict[str, Any] | None`` count): the issue's measure."""
    for node in ast.walk(ann) if ann is not None else ():
        if isinstance(node, ast.Name) and node.id == "Dict":
            return True
        if (
            isinstance(node, ast.Subscript)
            and ast.unparse(node.value) in MAPPINGS
            and isinstance(node.slice, ast.Tuple)
            and ast.unparse(node.slice.elts[-1]) == "Any"
        ):
            return True
    return False


def _bare_any(ann: ast.expr | None) -> bool:
    return isinstance(ann, ast.Name) and ann.id == "Any"


def _arguments(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> list[ast.arg]:
    a = fn.args
    args = [*a.posonlyargs, *a.args, *a.kwonlyargs]
    args += [x for x in (a.vararg, a.kwarg) if x is not None]
    return [x for x in args if x.arg not in ("self", "cls")]


def count_module(path: Path, counts: Counts) -> None:
    rel = str(path.relative_to(REPO))
    tree = ast.parse(path.read_text())
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            args = _arguments(node)
            where = f"{rel}:{node.lineno} {node.name}"
            if node.returns is None or any(a.annotation is None for a in args):
                counts.unannotated.append(where)
            anns = [node.returns, *(a.annotation for a in args)]
            if any(_any_data(x) for x in anns):
                counts.untyped_data.append(where)
            if any(_bare_any(x) for x in anns):
                counts.bare_any.append(where)
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr == "get"
            and node.args
            and isinstance(node.args[0], ast.Constant)
            and isinstance(node.args[0].value, str)
        ):
            counts.gets += 1


def measure() -> tuple[Counts, Counts]:
    """(counted, excepted): the results side, and the file parsers and migration apart."""
    counted, excepted = Counts(), Counts()
    for pkg in PACKAGES:
        for path in sorted((REPO / "kimi_bench" / pkg).rglob("*.py")):
            rel = str(path.relative_to(REPO))
            count_module(path, excepted if rel in EXCEPTED else counted)
    return counted, excepted


def main() -> int:
    counted, excepted = measure()
    print(f"results side ({', '.join(PACKAGES)}), peers' parsers and migration apart:")
    print(f"  functions with an unannotated parameter or return: {len(counted.unannotated)}")
    print(
        "  functions whose signature is untyped data (dict[str, Any], Mapping[str, Any], "
        f"a Dict alias): {len(counted.untyped_data)}"
    )
    print(f"  functions with a parameter or return of type Any: {len(counted.bare_any)}")
    print(f'  .get("...") calls: {counted.gets}')
    print("peers' parsers and migration:")
    print(f"  unannotated: {len(excepted.unannotated)}")
    print(f"  untyped data: {len(excepted.untyped_data)}")
    print(f"  Any: {len(excepted.bare_any)}")
    print(f'  .get("..."): {excepted.gets}')
    for where in counted.unannotated:
        print(f"  unannotated: {where}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
