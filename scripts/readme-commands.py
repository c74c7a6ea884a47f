#!/usr/bin/env python3
"""Run every command line of the README's and the docs' fenced ``bash`` examples, as a user would.

    python scripts/readme-commands.py                 # all of them, in a fresh temp folder
    python scripts/readme-commands.py --list          # what would run or be skipped, and why
    python scripts/readme-commands.py --only micro    # the blocks with a line matching

The commands run with this interpreter's environment first on PATH (run the script with the
venv whose ``kimi-bench`` you want to try; CI uses a venv with the built wheel installed, not
editable), each in ``bash`` with no standard input, in README order, all in ONE fresh folder
outside the checkout, as a reader who types them one after the other: a line sees what every
earlier line wrote (``kimi-bench run --output-dir out`` then ``kimi-bench gate out/micro``),
and two blocks that write the same folder collide as they would for the reader. The README
comes first, then every ``docs/*.md`` page beside it, by name (``--docs`` picks another
folder, ``--no-docs`` none); a line is named by its file and line (``[docs/micro.md line 5]``).
Continuation lines (a trailing backslash) are joined; comment lines are not commands.

A line is skipped, with its reason printed, when

- its trailing comment says ``needs: WHAT`` (one or more of the words in NEEDS below, e.g.
  ``kimi-bench serve-ab --scenario serve-ab  # the PR shape; needs: gpu``), or
- ``.ci/run`` runs it verbatim (the README's set-up and test commands and its main job,
  ``kimi-bench run``), or
- an earlier line, in the README or a docs page, was the same command (it ran once).

The folder gets only what the README names and does not make (see FIXTURES), when a line
first mentions it: ``~/photos`` (the reader's photos: a few real JPEG and PNG files),
``my.toml`` (the reader's scenario: a small one), ``reports/<part>`` (the checkout's
committed reports, copied) and ``$GITHUB_STEP_SUMMARY`` (a file, when unset). Everything
else a line reads must be made by an earlier line. Exit code: 0 when every line that ran
succeeded, 1 when one failed (its output's tail is printed), 2 for a README this script
cannot read (an unknown ``needs:`` word).
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

NEEDS = {
    "gpu": "needs a CUDA GPU, or is far too long on a CPU",
    "nodes": "needs several machines: torchrun across nodes",
    "server": "needs real OpenAI-compatible model servers, e.g. SGLang, to talk to",
    "model": "starts a model server: needs the model's weights and SGLang on GPUs",
    "sglang": "needs the SGLang reference environment: .ci/run builds it, runs pytest -m sglang",
    "tfserve": "needs the checkout's tests and a transformers serve environment: .ci/run "
    "builds it, runs pytest tests/thirdparty",
    "long": "too long for CPU CI",
    "foreground": "runs until stopped (a server); the tests start it and stop it",
}
NEEDS_RE = re.compile(r"\bneeds:\s*([\w-]+(?:\s*,\s*[\w-]+)*)")
FENCE_RE = re.compile(r"^\s*```\s*(\S*)")

MY_TOML = """\
# Fixture for the README's `kimi-bench run --scenario my.toml` (scripts/readme-commands.py):
# a scenario of one's own, small: parity on the built-in corpus and a short serve-ab.
[run]
description = "the README's example scenario: parity and a short serve-ab"

[parity]
ranks = 2

[serve_ab]
rates = ["inf"]
requests = 6
ranks = 2
image_resolution = "240x320"
warmup_requests = 1

[gate]
rules = "gate"
"""


class ReadmeError(ValueError):
    """A README this script cannot turn into commands (the message names the line)."""


@dataclass(frozen=True)
class Command:
    line: int  # line number of the command's first line in its file
    block: int  # fenced block number (1-based, counted across every file read)
    text: str  # the command, continuation lines joined, without its trailing comment
    comment: str  # the trailing comment ("" when none)
    source: str = "README"  # the file: README, or docs/<page>.md

    @property
    def where(self) -> str:
        return f"{self.source} line {self.line}"

    @property
    def needs(self) -> tuple[str, ...]:
        m = NEEDS_RE.search(self.comment)
        return tuple(w.strip() for w in m.group(1).split(",")) if m else ()


def split_comment(line: str) -> tuple[str, str]:
    """(command, comment) of one shell line: ``#`` starts a comment at the start of the line
    or after whitespace, outside quotes and not escaped."""
    quote, i = "", 0
    while i < len(line):
        ch = line[i]
        if ch == "\\" and quote != "'":
            i += 2  # an escaped character
            continue
        if quote:
            quote = "" if ch == quote else quote
        elif ch in "'\"":
            quote = ch
        elif ch == "#" and (i == 0 or line[i - 1].isspace()):
            return line[:i].rstrip(), line[i + 1 :].strip()
        i += 1
    return line.rstrip(), ""


SHELL_LANGS = ("bash", "sh", "shell")


def fenced_blocks(text: str) -> list[list[tuple[int, str]]]:
    """The shell (``bash``) fenced blocks: lists of (line number, line)."""
    blocks: list[list[tuple[int, str]]] = []
    current: list[tuple[int, str]] | None = None
    inside = False
    for no, line in enumerate(text.splitlines(), start=1):
        m = FENCE_RE.match(line)
        if m and not inside:
            inside = True
            current = [] if m.group(1) in SHELL_LANGS else None
        elif m and not m.group(1):
            if current is not None:
                blocks.append(current)
            inside, current = False, None
        elif current is not None:
            current.append((no, line))
    if inside:
        raise ReadmeError("a fenced block is never closed")
    return blocks


def parse(text: str, source: str = "README", first_block: int = 1) -> list[Command]:
    """Every command line of one file's fenced shell examples, in order."""
    out = []
    for b, block in enumerate(fenced_blocks(text), start=first_block):
        pending: list[str] = []
        first = 0
        for no, raw in block:
            if not pending and not raw.strip():
                continue
            if not pending and raw.lstrip().startswith("#"):
                continue  # a comment line
            first = first or no
            if raw.rstrip().endswith("\\"):
                pending.append(raw.rstrip()[:-1].strip())
                continue
            cmd, comment = split_comment(" ".join([*pending, raw.strip()]))
            c = Command(first, b, cmd, comment, source)
            unknown = [w for w in c.needs if w not in NEEDS]
            if unknown:
                raise ReadmeError(
                    f"{source} line {first}: unknown 'needs:' word(s) {unknown}; known: "
                    + ", ".join(NEEDS)
                )
            out.append(c)
            pending, first = [], 0
        if pending:
            raise ReadmeError(f"{source} line {first}: continuation line at the end of a block")
    return out


def parse_files(readme: Path, docs: Path | None) -> list[Command]:
    """The README's commands, then each ``docs/*.md`` page's, by page name."""
    out = parse(readme.read_text())
    pages = sorted(docs.glob("*.md")) if docs is not None and docs.is_dir() else []
    for page in pages:
        first = max((c.block for c in out), default=0) + 1
        source = f"{docs.name}/{page.name}" if docs is not None else page.name
        out += parse(page.read_text(), source, first)
    return out


def ci_commands(ci_script: Path) -> set[str]:
    """The command lines ``.ci/run`` runs verbatim (comments stripped)."""
    if not ci_script.is_file():
        return set()
    return {split_comment(line.strip())[0] for line in ci_script.read_text().splitlines()} - {""}


def skip_reason(c: Command, seen: dict[str, str], in_ci: set[str]) -> str | None:
    if c.needs:
        return "; ".join(NEEDS[w] for w in c.needs)
    if c.text in in_ci:
        return ".ci/run runs it itself, as written: the set-up, the tests, the main job"
    if c.text in seen:
        return f"the same command as {seen[c.text]} (ran once)"
    return None


# --- fixtures ------------------------------------------------------------------------------


def make_photos(folder: Path) -> Path:
    """A few real images: the two photographs scikit-learn ships (when installed) and PNGs
    derived from them (RGBA with partial alpha, grayscale); a synthetic JPEG without them."""
    from PIL import Image

    folder.mkdir(parents=True, exist_ok=True)
    spec = importlib.util.find_spec("sklearn")
    images = Path(spec.origin).parent / "datasets" / "images" if spec and spec.origin else None
    photos = sorted(images.glob("*.jpg")) if images and images.is_dir() else []
    for p in photos:
        shutil.copy2(p, folder / p.name)
    if photos:
        base = Image.open(photos[0]).convert("RGB")
    else:
        base = Image.radial_gradient("L").resize((640, 480)).convert("RGB")
        base.save(folder / "gradient.jpg", quality=90)
    rgba = base.resize((base.width // 2, base.height // 2)).convert("RGBA")
    rgba.putalpha(Image.linear_gradient("L").resize(rgba.size))
    rgba.save(folder / "half_alpha.png")
    base.convert("L").resize((301, 199)).save(folder / "gray_odd.png")
    return folder


def _copy_tree(src: Path, dest: Path) -> None:
    if not dest.exists():
        shutil.copytree(src, dest, symlinks=True)


# what the README names but does not make -> what the reader's folder is given
FIXTURES = {
    "~/photos": "your photos: a folder of real JPEG/PNG files",
    "my.toml": "your scenario: a small one (parity and a short serve-ab)",
    "reports/<part>": "the checkout's committed reports under reports/<part>, copied",
    "$GITHUB_STEP_SUMMARY": "a file in the folder when the variable is unset",
}
REPORTS_RE = re.compile(r"(?:^|[\s=])reports/([\w.-]+)")


def prepare(c: Command, folder: Path, shared: Path) -> str:
    """Give the folder what ``c`` names and no line makes; the command with its
    placeholders replaced."""
    text = c.text
    if "~/photos" in text:
        photos = shared / "photos"
        if not photos.is_dir():
            make_photos(photos)
        text = text.replace("~/photos", str(photos))
    if re.search(r"(^|\s)my\.toml(\s|$)", text) and not (folder / "my.toml").exists():
        (folder / "my.toml").write_text(MY_TOML)
    for part in REPORTS_RE.findall(text):  # the committed reports a line reads
        if (REPO / "reports" / part).is_dir() and part != "runs":
            _copy_tree(REPO / "reports" / part, folder / "reports" / part)
    return text


def command_env(folder: Path) -> dict[str, str]:
    env = dict(os.environ)
    env.pop("PYTHONPATH", None)  # the installed package, never the checkout's
    bindir = str(Path(sys.executable).parent)
    env["PATH"] = os.pathsep.join([bindir, env.get("PATH", "")])
    env.setdefault("MPLBACKEND", "Agg")
    if not env.get("GITHUB_STEP_SUMMARY"):
        env["GITHUB_STEP_SUMMARY"] = str(folder / "step-summary.md")
    return env


# --- running -------------------------------------------------------------------------------


def run_one(c: Command, text: str, folder: Path, log: Path, timeout_s: float) -> bool:
    t0 = time.monotonic()
    print(f"[{c.where}] $ {text}", flush=True)
    with log.open("w") as fh:
        try:
            done = subprocess.run(
                ["bash", "-o", "pipefail", "-c", text],
                cwd=folder,
                env=command_env(folder),
                stdin=subprocess.DEVNULL,
                stdout=fh,
                stderr=subprocess.STDOUT,
                timeout=timeout_s,
            )
            rc = done.returncode
        except subprocess.TimeoutExpired:
            rc = 124
            fh.write(f"\n(stopped after {timeout_s:.0f} s)\n")
    took = time.monotonic() - t0
    if rc == 0:
        print(f"    ok in {took:.1f} s (log: {log})", flush=True)
        return True
    tail = "\n".join(log.read_text(errors="replace").splitlines()[-25:])
    print(f"    FAILED with exit code {rc} after {took:.1f} s (log: {log})\n{tail}", flush=True)
    return False


def installed_from() -> str:
    """Where this interpreter imports kimi_bench from (says so when it is the checkout)."""
    spec = importlib.util.find_spec("kimi_bench")
    if spec is None or spec.origin is None:
        return "kimi_bench is not importable by this interpreter"
    where = Path(spec.origin).resolve().parent
    inside = REPO in where.parents
    return f"kimi_bench from {where}" + (" (the checkout: an editable install)" if inside else "")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--readme", type=Path, default=REPO / "README.md")
    ap.add_argument("--docs", type=Path, help="pages to run after the README (default: the "
                    "docs folder beside it, when there is one)")  # fmt: skip
    ap.add_argument("--no-docs", action="store_true", help="the README only")
    ap.add_argument("--ci-script", type=Path, default=REPO / ".ci" / "run")
    ap.add_argument("--workdir", type=Path, help="where blocks run (default: a new temp folder)")
    ap.add_argument("--only", help="run only the blocks with a line matching this regex")
    ap.add_argument("--list", action="store_true", help="print the plan, run nothing")
    ap.add_argument("--installed", action="store_true", help="refuse an editable install")
    ap.add_argument("--timeout", type=float, default=900, help="seconds per command")
    args = ap.parse_args(argv)
    try:
        docs = None if args.no_docs else (args.docs or args.readme.parent / "docs")
        commands = parse_files(args.readme, docs)
    except (OSError, ReadmeError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    origin = installed_from()
    pages = len({c.source for c in commands} - {"README"})
    print(
        f"README commands of {args.readme} and {pages} docs page(s) with {sys.executable}; "
        f"{origin}",
        flush=True,
    )
    if args.installed and ("checkout" in origin or "not importable" in origin):
        print("error: --installed: kimi-bench must be installed from a wheel", file=sys.stderr)
        return 2
    return run_all(commands, args)


def run_all(commands: list[Command], args: argparse.Namespace) -> int:
    workdir = (args.workdir or Path(tempfile.gettempdir()) / "-").resolve()
    if not args.list:
        workdir = args.workdir or Path(tempfile.mkdtemp(prefix="kb-readme-"))
        workdir = workdir.resolve()
    if REPO in [workdir, *workdir.parents]:
        print(f"error: --workdir {workdir} is inside the checkout", file=sys.stderr)
        return 2
    if not args.list:
        workdir.mkdir(parents=True, exist_ok=True)
        (workdir / "started").touch()  # what the commands write is newer than this
    in_ci: set[str] = ci_commands(args.ci_script)
    seen: dict[str, str] = {}
    ok = failed = skipped = 0
    t0 = time.monotonic()
    # --only picks whole blocks: a line may need the files an earlier line of its block made
    # (a block that needs an earlier block's files needs that block picked too)
    blocks = {c.block for c in commands if not args.only or re.search(args.only, c.text)}
    for c in commands:
        if c.block not in blocks:
            continue
        reason = skip_reason(c, seen, in_ci)
        seen.setdefault(c.text, c.where)
        if reason:
            print(f"[{c.where}] skipped ({reason}): {c.text}", flush=True)
            skipped += 1
            continue
        if args.list:
            print(f"[{c.where}] block {c.block}: {c.text}")
            ok += 1
            continue
        folder = workdir / "folder"  # the reader's one folder: every block, in order
        folder.mkdir(parents=True, exist_ok=True)
        text = prepare(c, folder, workdir)
        slug = c.source.replace("/", "-").removesuffix(".md")
        log = workdir / "logs" / f"{slug}-line-{c.line:04d}.log"
        log.parent.mkdir(exist_ok=True)
        if run_one(c, text, folder, log, args.timeout):
            ok += 1
        else:
            failed += 1
    word = "to run" if args.list else "ok"
    print(
        f"README commands: {ok} {word}, {failed} failed, {skipped} skipped "
        f"in {time.monotonic() - t0:.0f} s" + ("" if args.list else f"; folder: {workdir}"),
        flush=True,
    )
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
