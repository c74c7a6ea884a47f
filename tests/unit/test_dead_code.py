"""No dead code in ``kimi_bench``: vulture at min confidence 60 over the package, with the
tests and scripts read too (code that only a test or a script calls counts as used) and
``tests/vulture_whitelist.py`` naming what only the runtime or a library reaches. Fields
of data shapes (an annotated name in a class body: TypedDict, pydantic model and
dataclass fields) are the JSON's keys, read by key or by serialization, and are not
reported; pydantic validators are called by pydantic."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
import vulture

pytestmark = pytest.mark.slow  # vulture over the package: ~5 s; the full suite runs it

REPO = Path(__file__).resolve().parents[2]
MIN_CONFIDENCE = 60
VALIDATORS = ["@field_validator", "@model_validator"]


def _field_lines(path: Path) -> set[int]:
    """Lines of the annotated names directly in a class body (data shapes' fields)."""
    tree = ast.parse(path.read_text())
    return {
        stmt.lineno
        for node in ast.walk(tree)
        if isinstance(node, ast.ClassDef)
        for stmt in node.body
        if isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name)
    }


def dead_code(package: Path, *users: Path) -> list[str]:
    """vulture's findings in ``package`` (its uses read from ``users`` too), fields of
    data shapes left out."""
    v = vulture.Vulture(ignore_decorators=VALIDATORS)
    v.scavenge([str(package), *map(str, users)])
    fields: dict[Path, set[int]] = {}
    out = []
    for item in v.get_unused_code(min_confidence=MIN_CONFIDENCE):
        path = Path(item.filename).resolve()
        if not path.is_relative_to(package.resolve()):
            continue
        if item.typ == "variable":
            if path not in fields:
                fields[path] = _field_lines(path)
            if item.first_lineno in fields[path]:
                continue
        out.append(item.get_report())
    return out


def test_the_package_holds_no_dead_code() -> None:
    found = dead_code(REPO / "kimi_bench", REPO / "tests", REPO / "scripts")
    assert not found, "dead code (remove it, or name it in tests/vulture_whitelist.py):\n" + (
        "\n".join(found)
    )


def test_dead_code_is_found_and_fields_are_not(tmp_path: Path) -> None:
    pkg = tmp_path / "pkg"
    pkg.mkdir()
    (pkg / "mod.py").write_text(
        "from typing import TypedDict\n\n\n"
        "class Row(TypedDict):\n    never_read: int\n\n\n"
        "def used() -> Row:\n    return {'never_read': 1}\n\n\n"
        "def unused() -> None:\n    pass\n\n\n"
        "LEFT_OVER = 3\n\n\nused()\n"
    )
    users = tmp_path / "tests"
    users.mkdir()
    (users / "test_mod.py").write_text("from pkg.mod import Row\n")
    found = dead_code(pkg, users)
    assert len(found) == 2, found
    assert "unused function 'unused'" in found[0] and "unused variable 'LEFT_OVER'" in found[1]
