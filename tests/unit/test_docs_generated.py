"""The reference pages that the code defines (docs/options.md, docs/rules.md, the runtime
table in docs/pipeline.md) are what scripts/gen-docs.py writes from the code: a page left
stale after an option, a help text or a rule changed fails here, naming the page."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

REPO = Path(__file__).resolve().parents[2]


def _load() -> ModuleType:
    spec = importlib.util.spec_from_file_location("gen_docs", REPO / "scripts" / "gen-docs.py")
    assert spec and spec.loader
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod
    spec.loader.exec_module(mod)
    return mod


gen = _load()


def test_generated_pages_are_current():
    assert gen.stale() == [], "run: python scripts/gen-docs.py"


def test_every_visible_option_of_every_command_is_on_the_options_page():
    import typer

    from kimi_bench.cli.main import app

    page = (REPO / "docs" / "options.md").read_text()
    group = typer.main.get_command(app)
    for name, cmd in group.commands.items():  # type: ignore[attr-defined]
        if cmd.hidden:
            assert f"`kimi-bench {name}`" not in page
            continue
        section = page.split(f"## `kimi-bench {name}`\n", 1)[1].split("\n## ", 1)[0]
        for p in cmd.params:
            if p.param_type_name == "option" and not p.hidden:
                assert all(f"`{o}`" in section for o in p.opts), (name, p.opts)


def test_a_stale_page_is_named(tmp_path: Path):
    docs = tmp_path / "docs"
    docs.mkdir()
    for page in ("options.md", "rules.md", "pipeline.md"):
        (docs / page).write_text((REPO / "docs" / page).read_text())
    assert gen.stale(docs) == []
    text = (docs / "rules.md").read_text().replace("`max_failed`", "`max_failures`")
    (docs / "rules.md").write_text(text)
    assert gen.stale(docs) == ["docs/rules.md"]


def test_every_rules_key_is_on_the_rules_page():
    from kimi_bench.ci.rules import BaselineRules, MicroRules, ParityRules, RateRules

    page = (REPO / "docs" / "rules.md").read_text()
    for model in (ParityRules, MicroRules, RateRules, BaselineRules):
        for key in model.model_fields:
            assert f"| `{key}` |" in page, key
