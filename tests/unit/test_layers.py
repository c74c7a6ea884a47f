"""The import structure of ``kimi_bench``, read from the AST of every module: arrows point
down the layers (README "Layout"), nothing imports the CLI, no import cycles, and no
function-level import except for optional heavy dependencies (listed here)."""

from __future__ import annotations

import ast
import functools
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2] / "kimi_bench"

# layer -> module prefixes (a module belongs to the first layer whose prefix it starts with)
LAYERS: list[tuple[str, tuple[str, ...]]] = [
    ("cli", ("kimi_bench.cli",)),
    ("scenarios", ("kimi_bench.bench", "kimi_bench.bench.runner")),
    ("serving", ("kimi_bench.serving",)),
    ("engine", ("kimi_bench.engine",)),
    ("sglang_ref", ("kimi_bench.sglang_ref",)),
    ("pipeline", ("kimi_bench.pipeline",)),
    ("ci", ("kimi_bench.ci",)),
    ("peers", ("kimi_bench.peers",)),
    ("project", ("kimi_bench.project",)),
    ("report", ("kimi_bench.report", "kimi_bench.schemas")),
    ("infra", ("kimi_bench.infra",)),
    ("core", ("kimi_bench",)),
]
# what each layer may import besides itself
MAY_IMPORT: dict[str, set[str]] = {
    "infra": set(),
    "core": {"infra"},
    "pipeline": {"core", "infra"},
    "sglang_ref": {"core", "infra", "pipeline"},
    "engine": {"core", "infra", "pipeline", "sglang_ref"},
    "serving": {"core", "infra", "pipeline", "engine"},
    "report": {"core", "infra"},
    "ci": {"core", "infra", "report"},
    "peers": {"core", "infra", "report", "ci"},
    "project": {"core", "infra", "report"},
    "scenarios": {"core", "infra", "pipeline", "sglang_ref", "engine", "serving", "report", "ci"},
    "cli": {"core", "infra", "pipeline", "sglang_ref", "engine", "serving", "report", "ci",
            "project", "scenarios", "peers"},
}  # fmt: skip
# function-level imports allowed: optional heavy dependencies, imported when used (the CLI
# imports the library inside its command bodies so that --help and usage errors never load
# torch: allowed there); ruptures imports scipy.stats
LAZY_OK = ("sglang", "matplotlib", "kimi_bench.sglang_ref", "torch", "scipy", "ruptures", "PIL")


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def layer_of(module: str) -> str:
    for layer, prefixes in LAYERS:
        if any(module == p or module.startswith(p + ".") for p in prefixes):
            return layer
    raise AssertionError(f"{module} is in no layer")


def _resolve(module: str, is_pkg: bool, node: ast.ImportFrom) -> str:
    if not node.level:
        return node.module or ""
    base = module.split(".")
    base = base if is_pkg else base[:-1]
    base = base[: len(base) - (node.level - 1)]
    return ".".join(base + ([node.module] if node.module else []))


def imports(path: Path) -> list[tuple[str, bool, int]]:
    """(imported module, at top level?, line) for every kimi_bench import and lazy import."""
    module, is_pkg = module_name(path), path.name == "__init__.py"
    tree = ast.parse(path.read_text())
    top = {id(n) for n in tree.body}
    for n in tree.body:  # imports under `if TYPE_CHECKING:` are not run
        if isinstance(n, ast.If):
            top |= {id(x) for x in n.body} | {id(x) for x in n.orelse}
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            names = [_resolve(module, is_pkg, node)]
            names += [f"{names[0]}.{a.name}" for a in node.names]
        else:
            continue
        for name in names:
            out.append((name, id(node) in top, node.lineno))
    return out


def _known(name: str, modules: set[str]) -> str | None:
    while name:
        if name in modules:
            return name
        name = name.rpartition(".")[0]
    return None


@functools.lru_cache(maxsize=1)  # the sources are parsed once per process (tests copy it)
def graph() -> tuple[dict[str, set[str]], list[str]]:
    files = sorted(ROOT.rglob("*.py"))
    modules = {module_name(p) for p in files}
    edges: dict[str, set[str]] = {m: set() for m in modules}
    lazy: list[str] = []
    for p in files:
        src = module_name(p)
        for name, at_top, line in imports(p):
            target = _known(name, modules) if name.startswith("kimi_bench") else None
            in_cli = layer_of(src) == "cli"  # the CLI imports the library when a command runs
            if target and not at_top and not in_cli and not name.startswith(LAZY_OK):
                lazy.append(f"{src}:{line} imports {target} inside a function")
            if target and target != src:  # a function-level import is a dependency too
                edges[src].add(target)
    return edges, lazy


def _cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []
    counter = [0]

    def visit(v: str) -> None:
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in edges[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(edges):
        if v not in index:
            visit(v)
    return out


def violations(edges: dict[str, set[str]]) -> list[str]:
    bad = []
    for src, targets in sorted(edges.items()):
        a = layer_of(src)
        for dst in sorted(targets):
            b = layer_of(dst)
            if dst.startswith("kimi_bench.cli") and a != "cli":
                bad.append(f"{src} -> {dst}: nothing imports the CLI")
            elif b != a and b not in MAY_IMPORT[a] and dst != "kimi_bench":
                bad.append(f"{src} ({a}) -> {dst} ({b})")
    return bad


# What is left of the layering work (issue 20), named so that the tests below fail on any
# NEW upward import, cycle or function-level import; each entry goes when it is fixed.
KNOWN_UPWARD: set[str] = set()
KNOWN_CYCLES: list[list[str]] = []
KNOWN_LAZY_MODULES: set[str] = set()

# one worker runs the module: the sources are parsed once (graph() is cached)
pytestmark = pytest.mark.xdist_group("layers")


def test_no_new_import_points_up_the_layers():
    edges, _ = graph()
    assert set(violations(edges)) <= KNOWN_UPWARD


def test_no_new_import_cycles():
    edges, _ = graph()
    assert [c for c in _cycles(edges) if c not in KNOWN_CYCLES] == []


def test_no_new_function_level_imports():
    _, lazy = graph()
    assert sorted({x for x in lazy if x.split(":")[0] not in KNOWN_LAZY_MODULES}) == []


def test_the_rule_fails_on_an_upward_import():
    edges, _ = graph()
    edges = {k: set(v) for k, v in edges.items()}
    edges["kimi_bench.domain.config"].add("kimi_bench.pipeline")  # core -> pipeline: upward
    edges["kimi_bench.pipeline"].add("kimi_bench.domain.config")
    assert "kimi_bench.domain.config (core) -> kimi_bench.pipeline (pipeline)" in violations(edges)
    assert any("kimi_bench.domain.config" in c for c in _cycles(edges))


@pytest.mark.parametrize("layer", [name for name, _ in LAYERS])
def test_every_layer_is_listed_in_the_rules(layer):
    assert layer in MAY_IMPORT


def test_a_spawned_worker_imports_nothing_heavy_before_it_dies_with_its_parent():
    """Spawned workers import ``engine.child`` first and only then ask the kernel to kill
    them with their parent; importing torch before that (seconds) would leave a worker
    running after a SIGKILLed parent (tests/bad_inputs/test_processes.py)."""
    import subprocess
    import sys

    code = (
        "import sys, kimi_bench.engine.child\n"
        "print(sorted(m for m in sys.modules if m == 'torch' or m.startswith('kimi_bench')))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "['kimi_bench', 'kimi_bench.engine', 'kimi_bench.engine.child']"
