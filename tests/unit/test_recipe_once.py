"""The pipeline's sequence is written once (``pipeline/recipe.py``) and arms, carriers and
decoders are objects (issue 29), read from the AST of every module:

- no engine (``engine/``) and no in-process runner (``pipeline/in_process.py``) calls a
  part of the sequence itself: they call the recipe's steps only;
- no arm, carrier or decoder name is compared anywhere but in its own module and in the
  options (the ``Literal`` lists); ``startswith`` on a name's prefix counts too.
"""

from __future__ import annotations

import ast
import typing
from pathlib import Path

import pytest

from kimi_bench import options as O

ROOT = Path(__file__).resolve().parents[2] / "kimi_bench"

# the steps the recipe strings together (``pipeline/steps.py``, the arms' and carriers'
# methods): an engine that calls one of them writes the sequence again
PARTS = {
    "decide", "produce", "produce_zero_copy", "pack", "wrap", "wrap_shm", "serialize",
    "deserialize", "record_ipc", "take", "rank_step", "held_slots", "release_slots",
    "gather", "stage", "to_device", "to_host", "owner_decode", "arena_to_device",
}  # fmt: skip
SEQUENCE_FREE = [*sorted((ROOT / "engine").glob("*.py")), ROOT / "pipeline" / "in_process.py"]


def called_parts(source: str, where: str) -> list[str]:
    """Calls of a sequence part, other than through the recipe (``recipe.take``)."""
    out = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Call):
            f = node.func
            name = f.attr if isinstance(f, ast.Attribute) else getattr(f, "id", "")
            if name in PARTS and not (isinstance(f, ast.Attribute) and _is_recipe(f)):
                out.append(f"{where}:{node.lineno} calls {name}")
    return out


def _is_recipe(f: ast.Attribute) -> bool:
    return isinstance(f.value, ast.Name) and f.value.id == "recipe"


@pytest.mark.parametrize("path", SEQUENCE_FREE, ids=lambda p: str(p.relative_to(ROOT)))
def test_no_engine_writes_the_sequence_again(path: Path) -> None:
    assert called_parts(path.read_text(), str(path.relative_to(ROOT))) == []


def test_the_check_finds_a_step_an_engine_calls_itself() -> None:
    src = "def f(step, x):\n    recipe.take(step, r, x)\n    return rank_step(step, x)\n"
    assert called_parts(src, "x.py") == ["x.py:3 calls rank_step"]


# --------------------------------------------------------------- names are not compared

ARMS = set(typing.get_args(O.Arm))
CARRIERS = set(typing.get_args(O.MicroCarrier)) | set(typing.get_args(O.Carrier))
DECODERS = set(typing.get_args(O.DecoderName)) - {"auto"}
NAMES = ARMS | CARRIERS | DECODERS
PREFIXES = {"sglang-"}  # a carrier family's prefix
# where a name may be compared: its own module (an arm's, a carrier's) and the options
OWN = {
    "options/base.py",
    "pipeline/arms/__init__.py",
    "pipeline/carriers/__init__.py",
    "sglang_ref/carriers.py",
    "domain/decoders/__init__.py",
    # reports written before they recorded their arms' roles and carrier's traits named
    # them by the arms' and carriers' names: read once, here
    "report/roles.py",
}


def _strings(node: ast.AST) -> list[str]:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return [node.value]
    if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
        return [s for e in node.elts for s in _strings(e)]
    return []


# options whose choices share a name with a decoder's: parity's --reference pil (the
# PIL-BICUBIC reference) is not the PIL decoder
OTHER_OPTIONS = {"reference"}


def _other_option(node: ast.Compare) -> bool:
    return any(
        isinstance(side, ast.Attribute) and side.attr in OTHER_OPTIONS
        for side in (node.left, *node.comparators)
    )


def compared_names(source: str, where: str) -> list[str]:
    """``x == "eager"``, ``"zero-copy" in arms``, ``t in ("shm", ...)``, and
    ``startswith("sglang-")``."""
    out = []
    for node in ast.walk(ast.parse(source)):
        found: list[str] = []
        if isinstance(node, ast.Compare) and not _other_option(node):
            for side in (node.left, *node.comparators):
                found += [s for s in _strings(side) if s in NAMES]
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr in ("startswith", "endswith", "removeprefix")
        ):
            found += [s for a in node.args for s in _strings(a) if s in NAMES | PREFIXES]
        out += [f"{where}:{node.lineno} compares {s!r}" for s in found]
    return out


def test_no_arm_or_carrier_name_is_compared_outside_its_module() -> None:
    found = []
    for path in sorted(ROOT.rglob("*.py")):
        where = str(path.relative_to(ROOT))
        if where not in OWN:
            found += compared_names(path.read_text(), where)
    assert found == []


def test_the_check_finds_a_comparison() -> None:
    src = 'if arm == "zero-copy" or t in ("shm", "x") or c.startswith("sglang-"):\n    pass\n'
    hits = [h.split(" compares ")[1] for h in compared_names(src, "x.py")]
    assert hits == ["'zero-copy'", "'shm'", "'sglang-'"]
