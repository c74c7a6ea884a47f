"""A folder of request images (``serve-ab --images DIR``, ``--image-sizes folder:DIR``):
every JPEG, PNG and WebP file below it, found recursively, each identified from its header
(nothing is decoded). Any other file is refused by name before the run: a benchmark that
silently skipped a user's files would measure a different workload than the one named.
Hidden files and folders (``.DS_Store``, ``.git``) are skipped and counted."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from kimi_bench.domain.corpus_files import InputError, open_header, read_image_bytes
from kimi_bench.options.workload_specs import WorkloadError

PIL_FORMATS = {"JPEG": "jpeg", "PNG": "png", "WEBP": "webp"}
SHOWN = 10  # refused files named in the message, at most


@dataclass(frozen=True)
class FolderImage:
    path: Path
    width: int
    height: int
    format: str  # jpeg, png or webp
    size_bytes: int

    def read(self) -> bytes:
        try:
            return read_image_bytes(self.path)
        except InputError as exc:
            raise WorkloadError(f"{self.path}: {exc}") from None


@dataclass(frozen=True)
class Folder:
    root: Path
    images: tuple[FolderImage, ...]
    hidden_skipped: int


def _files(root: Path) -> tuple[list[Path], int]:
    """Every regular file below ``root`` (sorted), and the hidden entries skipped."""
    out: list[Path] = []
    hidden = 0
    for dirpath, dirnames, filenames in os.walk(root):
        kept = [d for d in dirnames if not d.startswith(".")]
        hidden += len(dirnames) - len(kept)
        dirnames[:] = sorted(kept)
        for name in sorted(filenames):
            if name.startswith("."):
                hidden += 1
            else:
                out.append(Path(dirpath) / name)
    return out, hidden


def _identify(path: Path, max_pixels: int) -> FolderImage | str:
    """The image, or why it is refused."""
    try:
        with open_header(path, max_pixels) as im:
            fmt = PIL_FORMATS.get(str(im.format))
            w, h = im.size
    except InputError as exc:
        return str(exc)
    if fmt is None:
        return f"a {im.format} image (JPEG, PNG or WebP are served)"
    return FolderImage(path, int(w), int(h), fmt, path.stat().st_size)


def scan_folder(root: Path, max_pixels: int = 100_000_000) -> Folder:
    """The folder's images; WorkloadError when it has none, or names the files that are
    not JPEG/PNG/WebP images (up to ``SHOWN`` of them, and how many more)."""
    root = Path(root)
    if not root.is_dir():
        raise WorkloadError(f"{root}: not a folder")
    files, hidden = _files(root)
    images: list[FolderImage] = []
    refused: list[str] = []
    for path in files:
        got = _identify(path, max_pixels)
        if isinstance(got, str):
            refused.append(f"{path.relative_to(root)} ({got})")
        else:
            images.append(got)
    if refused:
        more = f"; and {len(refused) - SHOWN} more" if len(refused) > SHOWN else ""
        raise WorkloadError(
            f"{root}: {len(refused)} file(s) are not JPEG/PNG/WebP images: "
            + "; ".join(refused[:SHOWN]) + more + " (remove them or point at another folder)"
        )  # fmt: skip
    if not images:
        raise WorkloadError(f"{root}: no JPEG, PNG or WebP image in this folder (recursively)")
    return Folder(root, tuple(images), hidden)
