"""The two revisions of a same-machine A/B (``kimi-bench ab``): each is an installed
``kimi-bench`` executable, or a git ref built into its own environment.

A ref is resolved to its commit in the repository, exported there (``git archive``) into
``<cache>/<commit>/src`` and installed (no dependencies, no network) into a virtual
environment ``<cache>/<commit>/venv`` that reuses the running interpreter's packages
(torch included) through a ``.pth`` line: only kimi-bench differs between the two sides.
A finished build is marked and reused by commit; an unfinished one is built again. The
revision's runs get ``KIMI_BENCH_GIT_COMMIT`` so their reports name the commit (an exported
tree has no ``.git``).

No torch import here: the A/B's own process stays light; the launches do the work."""

from __future__ import annotations

import io
import os
import shutil
import subprocess
import sys
import sysconfig
import tarfile
from dataclasses import dataclass, field
from pathlib import Path

BUILT = "built.ok"  # written last into <cache>/<commit>/ when the environment is complete
VERSION_TIMEOUT_S = 180.0  # `EXE --version` on a loaded host imports the CLI


class RevisionError(ValueError):
    """A revision that cannot be used (unknown ref, missing executable, failed build):
    a usage error (exit 2); the message names the option and the value."""


@dataclass(frozen=True)
class Revision:
    """One side of the A/B: how to start its ``kimi-bench`` (``command``), the environment
    its runs get on top of ours, and what it is."""

    label: str  # "base" or "candidate"
    given: str  # what the user passed
    source: str  # "executable" or "git ref"
    command: tuple[str, ...]
    env: dict[str, str] = field(default_factory=dict)
    commit: str | None = None  # known up front for a ref; else read from its reports
    version: str = ""  # what `kimi-bench --version` printed


def _git(repo: Path, *args: str) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(["git", "-C", str(repo), *args], capture_output=True, check=False)


def resolve_commit(repo: Path, ref: str) -> str | None:
    """The commit ``ref`` names in ``repo``, or None (unknown ref, not a repository)."""
    try:
        done = _git(repo, "rev-parse", "--verify", "--quiet", f"{ref}^{{commit}}")
    except OSError:
        return None
    text = done.stdout.decode().strip()
    return text if done.returncode == 0 and text else None


def _looks_like_path(value: str) -> bool:
    return os.sep in value or value.startswith(".") or Path(value).is_file()


def resolve(label: str, value: str, repo: Path, cache: Path) -> Revision:
    """``--base``/``--candidate`` VALUE: a path (or a name on PATH that is no ref) is an
    executable; anything else a git ref of ``repo``, built into ``cache``."""
    option = f"--{label}"
    if _looks_like_path(value):
        return _executable(label, value, Path(value))
    commit = resolve_commit(repo, value)
    if commit is not None:
        return _ref(label, value, commit, repo, cache)
    found = shutil.which(value)
    if found:
        return _executable(label, value, Path(found))
    raise RevisionError(
        f"{option} {value}: neither a git ref of {repo} nor an executable (no such file, "
        "not on PATH)"
    )


def _executable(label: str, value: str, path: Path) -> Revision:
    if not path.is_file():
        raise RevisionError(f"--{label} {value}: no such executable")
    if not os.access(path, os.X_OK):
        raise RevisionError(f"--{label} {value}: not executable (chmod +x?)")
    return Revision(label, value, "executable", (str(path.resolve()),))


def host_site_paths() -> list[str]:
    """Where the running interpreter finds its packages (torch among them)."""
    paths = sysconfig.get_paths()
    seen: list[str] = []
    for key in ("purelib", "platlib"):
        if paths[key] not in seen:
            seen.append(paths[key])
    return seen


def _ref(label: str, value: str, commit: str, repo: Path, cache: Path) -> Revision:
    home = cache / commit
    exe = home / "venv" / "bin" / "kimi-bench"
    if not (home / BUILT).is_file() or not exe.is_file():
        try:
            _build(repo, commit, home)
        except (OSError, subprocess.SubprocessError, tarfile.TarError) as exc:
            raise RevisionError(
                f"--{label} {value}: building {commit[:12]} failed: {exc}"
            ) from None
    env = {"KIMI_BENCH_GIT_COMMIT": commit, "KIMI_BENCH_GIT_DIRTY": "0"}
    return Revision(label, value, "git ref", (str(exe),), env, commit)


def _build(repo: Path, commit: str, home: Path) -> None:
    """Export ``commit`` and install it into its own venv that reuses our packages."""
    if home.exists():
        shutil.rmtree(home)  # an unfinished build (no BUILT marker)
    src, venv = home / "src", home / "venv"
    src.mkdir(parents=True)
    archive = _git(repo, "archive", "--format=tar", commit)
    if archive.returncode != 0:
        raise subprocess.SubprocessError(archive.stderr.decode().strip() or "git archive failed")
    with tarfile.open(fileobj=io.BytesIO(archive.stdout)) as tar:
        tar.extractall(src, filter="data")
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    python = venv / "bin" / "python"
    site = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        capture_output=True, text=True, check=True,
    ).stdout.strip()  # fmt: skip
    # after the venv's own packages: kimi-bench from the revision, the rest from ours
    Path(site, "kimi_bench_host.pth").write_text("\n".join(host_site_paths()) + "\n")
    pip = [sys.executable, "-m", "pip", "--python", str(python), "install", "-q"]
    done = subprocess.run(
        [*pip, "--no-deps", "--no-build-isolation", "--no-index", str(src)],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    if done.returncode != 0:
        tail = (done.stderr or done.stdout).strip().splitlines()[-3:]
        raise subprocess.SubprocessError("pip install: " + " / ".join(tail))
    (home / BUILT).write_text(commit + "\n")


def ask_version(rev: Revision) -> Revision:
    """``rev`` with what ``kimi-bench --version`` printed; RevisionError when it does not
    answer as kimi-bench does."""
    try:
        done = subprocess.run(
            [*rev.command, "--version"], capture_output=True, text=True,
            env=os.environ | rev.env, timeout=VERSION_TIMEOUT_S, check=False,
        )  # fmt: skip
    except (OSError, subprocess.SubprocessError) as exc:
        raise RevisionError(f"--{rev.label} {rev.given}: cannot run it: {exc}") from None
    text = done.stdout.strip()
    if done.returncode != 0 or not text.startswith("kimi-bench"):
        why = (done.stderr.strip().splitlines() or [text or "no output"])[-1]
        raise RevisionError(
            f"--{rev.label} {rev.given}: `--version` did not answer as kimi-bench "
            f"(exit {done.returncode}: {why})"
        )
    return Revision(rev.label, rev.given, rev.source, rev.command, rev.env, rev.commit, text)
