"""scripts/readme-commands.py: every command line of the README's and the docs pages' fenced
examples is found,
joined and either run (from a folder outside the checkout, with its fixtures) or skipped
with a printed reason; a line that fails makes the run fail. The full README run is a step
of .ci/run (minutes); these tests drive the script on small READMEs."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "scripts" / "readme-commands.py"


def _load() -> ModuleType:
    spec = importlib.util.spec_from_file_location("readme_commands", SCRIPT)
    assert spec and spec.loader
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod  # dataclasses look their module up
    spec.loader.exec_module(mod)
    return mod


rc = _load()

FENCE = "```"


def readme(*blocks: str, lang: str = "bash") -> str:
    return "\n".join(f"{FENCE}{lang}\n{b.strip()}\n{FENCE}\n" for b in blocks)


def run_script(readme_text: str, tmp_path: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    path = tmp_path / "README.md"
    path.write_text(readme_text)
    return subprocess.run(
        [sys.executable, str(SCRIPT), "--readme", str(path), "--workdir", str(tmp_path / "w"),
         "--ci-script", str(tmp_path / "no-ci"), *extra],
        capture_output=True, text=True, timeout=300, stdin=subprocess.DEVNULL,
    )  # fmt: skip


def test_commands_are_joined_stripped_of_comments_and_marked() -> None:
    text = (
        "Some prose.\n```\nan output excerpt, not a command\n```\n"
        + readme(
            "# a comment line\n"
            "kimi-bench run          # the main job\n"
            "\n"
            'kimi-bench gate a --summary "$X"   # needs: server\n'
            "torchrun --nnodes 2 \\\n"
            "  -m kimi_bench.cli.main micro --out m16  # needs: nodes, gpu\n"
            "echo 'a # not a comment' \\# neither",
        )
        + readme("print('python, not a shell block')", lang="python")
    )
    cmds = rc.parse(text)
    assert [c.text for c in cmds] == [
        "kimi-bench run",
        'kimi-bench gate a --summary "$X"',
        "torchrun --nnodes 2 -m kimi_bench.cli.main micro --out m16",
        "echo 'a # not a comment' \\# neither",
    ]
    assert [c.needs for c in cmds] == [(), ("server",), ("nodes", "gpu"), ()]
    assert [c.line for c in cmds] == [7, 9, 10, 12]
    assert cmds[0].comment == "the main job"


def test_an_unknown_marker_is_an_error_naming_the_line() -> None:
    with pytest.raises(rc.ReadmeError, match=r"README line 2: unknown 'needs:' word\(s\)"):
        rc.parse(readme("kimi-bench micro --device cuda  # needs: gpus"))


def test_the_readme_set_up_and_test_commands_are_what_ci_runs() -> None:
    """The README's two set-up commands and its test command stay as they are, and .ci/run
    runs them verbatim (so the runner leaves them to .ci/run); every other line is run or
    carries a reason."""
    cmds = rc.parse_files(REPO / "README.md", REPO / "docs")
    in_ci = rc.ci_commands(REPO / ".ci" / "run")
    setup = 'pip install torch==2.13.0 && pip install -e ".[dev,plot,photos]"'
    assert {setup, "python -m pytest -q"} <= in_ci
    texts = [c.text for c in cmds]
    assert "python3 -m venv .venv && . .venv/bin/activate" in texts
    assert setup in texts and "python -m pytest -q" in texts
    seen: dict[str, str] = {}
    ran = []
    for c in cmds:
        reason = rc.skip_reason(c, seen, in_ci)
        seen.setdefault(c.text, c.where)
        if reason is None:
            ran.append(c.text)
    # what CI runs from the installed wheel: the main commands, on their README lines
    for prefix in ("kimi-bench run", "kimi-bench parity", "kimi-bench micro",
                   "kimi-bench serve-ab", "kimi-bench gate", "kimi-bench compare",
                   "kimi-bench project"):  # fmt: skip
        assert any(t.startswith(prefix) for t in ran), prefix
    # what needs hardware CI lacks is skipped
    needs_more = ("torchrun", "sglang.launch_server", "kb-sglang", "--endpoint", "--device cuda")
    assert not [t for t in ran if any(w in t for w in needs_more)]


def test_a_failing_line_fails_the_run_and_says_which(tmp_path: Path) -> None:
    text = readme(
        "echo first-ok\n"
        "python -c 'import sys; print(\"went wrong\"); sys.exit(3)'\n"
        "kimi-bench micro --device cuda   # needs: gpu\n"
        "echo first-ok"
    )
    done = run_script(text, tmp_path)
    assert done.returncode == 1, done.stdout + done.stderr
    out = done.stdout
    assert "[README line 3] $ python -c" in out
    assert "FAILED with exit code 3" in out and "went wrong" in out
    assert "[README line 4] skipped (needs a CUDA GPU" in out
    assert "[README line 5] skipped (the same command as README line 2" in out
    assert "README commands: 1 ok, 1 failed, 2 skipped" in out


def test_lines_run_in_one_folder_outside_the_checkout_with_what_the_readme_names(
    tmp_path: Path,
) -> None:
    check_photos = (
        'python -c "import sys; from pathlib import Path; from PIL import Image; '
        "fs = sorted(Path(sys.argv[1]).iterdir()); [Image.open(f).load() for f in fs]; "
        "assert len(fs) >= 3 and {f.suffix for f in fs} >= {'.jpg', '.png'}, fs\" ~/photos"
    )
    text = readme(
        f"{check_photos}\n"
        "python -c 'import os; assert not os.getcwd().startswith(\"" + str(REPO) + "/\")'\n"
        "grep -q '^\\[serve_ab\\]' my.toml\n"
        "test -f reports/baselines/h200/micro/sglang-0.5.23/r2-shm/report.json.gz\n"
        "test -f reports/examples/cpu-run/micro/report.json\n"
        'test -n "$GITHUB_STEP_SUMMARY" && touch "$GITHUB_STEP_SUMMARY"\n'
        "mkdir -p out/x && touch out/x/written",
        "test -f out/x/written   # another block: the same folder, as for a reader",
        "test ! -e new-run   # nothing the README does not make or name is given",
    )
    done = run_script(text, tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "README commands: 9 ok, 0 failed, 0 skipped" in done.stdout
    assert (tmp_path / "w" / "folder" / "out" / "x" / "written").is_file()
    assert not (tmp_path / "w" / "folder" / "reports" / "runs").exists()


def test_a_folder_reused_by_a_later_block_fails_as_it_would_for_a_reader(tmp_path: Path) -> None:
    """The CI block's ``run --output-dir kb`` after an earlier block's ``kb``: in one folder
    the second write is refused, and the run says which line."""
    text = readme("mkdir kb && touch kb/report.json", "test ! -e kb/report.json  # reuses kb")
    done = run_script(text, tmp_path)
    assert done.returncode == 1
    assert "[README line 6] $ test ! -e kb/report.json" in done.stdout
    assert "README commands: 1 ok, 1 failed, 0 skipped" in done.stdout


def test_the_my_toml_fixture_is_a_valid_scenario(tmp_path: Path) -> None:
    from kimi_bench.bench.scenario import load_scenario

    path = tmp_path / "my.toml"
    path.write_text(rc.MY_TOML)
    sc = load_scenario(path)
    assert sc.serve_ab.requests == 6 and sc.gate.rules == "gate"


def test_list_shows_the_plan_and_runs_nothing(tmp_path: Path) -> None:
    done = run_script(readme("touch made-by-list"), tmp_path, "--list")
    assert done.returncode == 0
    assert "[README line 2] block 1: touch made-by-list" in done.stdout
    assert not (tmp_path / "w").exists()


def test_a_workdir_inside_the_checkout_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "README.md"
    path.write_text(readme("echo hi"))
    done = subprocess.run(
        [sys.executable, str(SCRIPT), "--readme", str(path), "--workdir", str(REPO / "out")],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 2 and "inside the checkout" in done.stderr


def test_only_picks_whole_blocks(tmp_path: Path) -> None:
    """A line may need what an earlier line of its block wrote: --only keeps the block."""
    text = readme("mkdir kb\ntest -d kb && echo gate-kb", "echo other-block")
    done = run_script(text, tmp_path, "--only", "gate-kb")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "README commands: 2 ok, 0 failed, 0 skipped" in done.stdout
    assert "other-block" not in done.stdout


def test_docs_pages_run_after_the_readme_named_by_page(tmp_path: Path) -> None:
    """Every fenced command block of docs/*.md runs too, after the README, by page name;
    a command already run on an earlier page or in the README runs once."""
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "b.md").write_text("# B\n\n" + readme("test -f from-a && echo page-b"))
    (docs / "a.md").write_text("# A\n\n" + readme("touch from-a\necho readme-line"))
    (docs / "notes.txt").write_text(readme("exit 7"))  # not a page
    done = run_script(readme("echo readme-line"), tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    out = done.stdout
    assert "and 2 docs page(s)" in out
    assert "[docs/a.md line 4] $ touch from-a" in out
    assert "[docs/a.md line 5] skipped (the same command as README line 2 (ran once))" in out
    assert "[docs/b.md line 4] $ test -f from-a" in out
    assert out.index("[README line 2]") < out.index("[docs/a.md") < out.index("[docs/b.md")
    assert "README commands: 3 ok, 0 failed, 1 skipped" in out
    assert run_script(readme("echo x"), tmp_path, "--no-docs").stdout.count("docs/") == 0


def test_a_failing_docs_line_fails_the_run_naming_its_page(tmp_path: Path) -> None:
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "x.md").write_text(readme("false   # a command a page shows, broken"))
    done = run_script(readme("echo ok"), tmp_path)
    assert done.returncode == 1
    assert "[docs/x.md line 2] $ false" in done.stdout and "FAILED with exit code 1" in done.stdout
