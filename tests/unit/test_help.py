"""Every command's --help as a user reads it: bracketed text printed literally (no Rich
markup eats ``[default: ...]`` or ``[serve_ab]``) and, at 80 columns, every option name
whole and no line wider than the terminal."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from typing import Any

import pytest
import typer
from typer.testing import CliRunner

from kimi_bench.cli.main import app

COMMANDS = ["parity", "micro", "serve-ab", "serve", "gate", "compare", "run", "project", "render"]


def _command(name: str) -> Any:
    group: Any = typer.main.get_command(app)  # typer's own click-like group
    return group.commands[name]


def _squash(text: str) -> str:
    return re.sub(r"\s+", "", text)


@pytest.mark.parametrize("name", COMMANDS)
def test_help_keeps_brackets_and_option_names_at_80_columns(name: str):
    res = CliRunner().invoke(app, [name, "--help"], env={"COLUMNS": "80"})
    assert res.exit_code == 0, res.output
    lines = res.output.splitlines()
    assert max(len(line) for line in lines) <= 80, [ln for ln in lines if len(ln) > 80]
    cmd = _command(name)
    out = _squash(res.output)
    for param in [p for p in cmd.params if not getattr(p, "hidden", False)]:
        for opt in (*param.opts, *param.secondary_opts):
            if opt.startswith("-"):
                assert re.search(rf"(^|[\s,/]){re.escape(opt)}([\s,]|$)", res.output), opt
        # every bracketed piece of the help text reaches the screen as written
        for piece in re.findall(r"\[[^\]]*\]", getattr(param, "help", None) or ""):
            assert _squash(piece) in out, (opt, piece)
    for piece in re.findall(r"\[[^\]]*\]", cmd.help or ""):
        assert _squash(piece) in out, piece
    assert "…" not in res.output


def test_serve_ab_help_shows_defaults_scenario_table_and_sizes_literally():
    env = {**os.environ, "COLUMNS": "80"}
    res = subprocess.run(
        [sys.executable, "-m", "kimi_bench.cli.main", "serve-ab", "--help"],
        capture_output=True, text=True, env=env, timeout=120, check=False,
    )  # fmt: skip
    assert res.returncode == 0, res.stderr
    out = _squash(res.stdout)
    assert "[serve_ab]table" in out  # was eaten as a Rich tag
    assert "[default:thefirstmodeleachserverlists]" in out
    assert "[default:kimi-k3]" in out and "\\[" not in res.stdout
    assert "[GPU:1536x1024,CPU:640x480]" in out  # one size order: WIDTHxHEIGHT
    assert "--image-count,--images-per-request" in out


# flags of other programs the README shows (pip, torchrun, SGLang, GuideLLM, AIPerf, vLLM,
# scripts/readme-commands.py): not kimi-bench's
FOREIGN = {
    "--append-result", "--artifact-dir", "--backend", "--base-url", "--concurrency",
    "--constraint", "--data", "--dataset-name", "--enable-metrics", "--endpoint-type",
    "--list", "--master-addr", "--master-port", "--mm-feature-transport", "--model-path",
    "--no-docs",
    "--nnodes", "--no-deps", "--node-rank", "--nproc-per-node", "--output", "--output-details",
    "--output-tokens-mean", "--profile", "--random-input-len", "--random-output-len",
    "--request-count", "--save-result", "--streaming", "--synthetic-input-tokens-mean",
    "--tokenizer", "--tp", "--url", "--use-server-token-count",
}  # fmt: skip


def _readme_and_docs() -> str:
    """The README and every docs page (what a reader is told to type)."""
    from pathlib import Path

    repo = Path(__file__).resolve().parents[2]
    pages = [repo / "README.md", *sorted((repo / "docs").glob("*.md"))]
    return "\n".join(p.read_text() for p in pages)


def test_every_option_the_readme_names_is_in_some_help():
    """README, docs and --help agree: no option the README or a docs page tells a reader to
    type is missing from the commands' help (a renamed or removed option fails here, by
    name)."""
    readme = _readme_and_docs()
    named = set(re.findall(r"(?<![\w-])--[a-z][a-z0-9-]+", readme)) - FOREIGN
    group: Any = typer.main.get_command(app)
    every = [name for name, c in group.commands.items() if not c.hidden]  # new ones too
    helps = [CliRunner().invoke(app, [c, "--help"], env={"COLUMNS": "200"}).output
             for c in every]  # fmt: skip
    shown = set(re.findall(r"(?<![\w-])--[a-z][a-z0-9-]+", " ".join(helps)))
    shown |= {"--help", "--version"}
    assert sorted(named - shown) == []


def test_request_timeout_reads_the_same_in_help_and_readme():
    readme = " ".join(_readme_and_docs().split())
    res = CliRunner().invoke(app, ["serve-ab", "--help"], env={"COLUMNS": "200"})
    text = " ".join(res.output.split())
    assert "One deadline per request" in text and "seconds without progress" not in text
    assert "is one deadline per request" in readme


def _option_help(name: str, flag: str) -> str:
    (param,) = [p for p in _command(name).params if flag in getattr(p, "opts", ())]
    return " ".join((param.help or "").split())


def _help(name: str) -> str:
    res = CliRunner().invoke(app, [name, "--help"], env={"COLUMNS": "200"})
    assert res.exit_code == 0, res.output
    return " ".join(res.output.split())


def test_every_path_a_help_shows_exists():
    """An example path in a help text (``compare``'s once named a folder that never
    existed) is one the checkout has, or one an earlier README line makes (``out/``)."""
    from pathlib import Path

    repo = Path(__file__).resolve().parents[2]
    cmds = [_command(c) for c in [*COMMANDS, "calibrate", "import"]]
    texts = " ".join([c.help or "" for c in cmds] + [p.help or "" for c in cmds for p in c.params
                      if getattr(p, "help", None)])  # fmt: skip
    found = set(re.findall(r"(?<![\w/])reports/[\w./<>-]*[\w>]", texts))
    paths = {p for p in found if "<" not in p and not p.startswith("reports/runs/")}
    assert paths, "no example path found: the test reads the help wrongly"
    assert sorted(p for p in paths if not (repo / p).exists()) == []


def test_list_options_say_they_take_several_values():
    arms = _option_help("micro", "--arms")
    assert "Comma-separated, any of: eager, deferred" in arms and "One of" not in arms
    assert "One of: shm, pickle" in _option_help("micro", "--transport")  # a single choice


def test_serve_help_says_what_the_emulator_decodes_with():
    from kimi_bench.options import StandinOptions

    interval = _option_help("serve", "--decode-interval-ms")
    assert "The emulator ignores it" in interval and "decode_gflop_per_token" in interval
    standin = _option_help("serve", "--standin")
    assert all(key in standin for key in StandinOptions.model_fields), standin


def test_run_output_dir_help_names_what_run_writes():
    out = _option_help("run", "--output-dir")
    for name in ("parity/", "micro/", "serve-ab/", "gate.md", "gate.xml", "index.html"):
        assert name in out, name
    assert "report.json" not in out and "CSV" not in out  # those are the parts', not run's


def test_import_names_its_input_tool_with_tool_and_keeps_format(tmp_path):
    """``--format`` is how tables print everywhere but ``import``, where it named the input
    tool: ``--tool`` says that, and ``--format`` still works there (scripts use it)."""
    from pathlib import Path

    (param,) = [p for p in _command("import").params if "--tool" in getattr(p, "opts", ())]
    assert "--format" in param.opts
    peers = Path(__file__).resolve().parents[2] / "tests" / "data" / "peers"
    for flag in ("--tool", "--format"):
        out = tmp_path / flag.strip("-")
        args = [str(peers / "sglang-a.jsonl"), flag, "sglang", "--tool-version", "0.5.23"]
        res = CliRunner().invoke(app, ["import", *args, "--output-dir", str(out)])
        assert res.exit_code == 0, res.output
        assert (out / "report.json").is_file()
