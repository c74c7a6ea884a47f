"""Inputs for parity runs: the built-in deterministic corpus and a user's folder.

Every entry loads lazily and a load failure becomes a per-input error, never an abort.
What a folder holds besides readable files is never skipped silently: each subfolder,
special file (FIFO, socket, device), broken link or link leading out of the folder gets
an entry whose load raises ``InputError`` saying why it was not read (see
``folder_corpus``). The files themselves are read by ``corpus_files``, which checks
sizes before allocating.
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import re
import stat
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
from PIL import Image

from kimi_bench.domain.config import PreprocessConfig
from kimi_bench.domain.corpus_files import (
    TENSOR_SUFFIXES,
    InputError,
    open_image,
    open_tensor,
    read_image_bytes,
)
from kimi_bench.domain.navit import plan_resize
from kimi_bench.domain.policy import decide_request
from kimi_bench.infra.limits import DEFAULT_MAX_PIXELS, file_kind


@dataclass
class CorpusEntry:
    name: str
    source: str  # "generated", "package:<name>", or a file path
    load: Callable[[], Any]
    # what a reader of the row must know about the input, set by ``load`` (e.g. "GIF with
    # 12 frames: frame 0 used"); None when there is nothing to say
    note: str | None = None
    # the input's encoded bytes as a client would send them (image files only), read
    # under the same guards as ``load``; None: it has none (generated, tensor)
    encoded: Callable[[], bytes] | None = None


def display_name(name: str) -> str:
    """A file name as text every report can hold: bytes that are not UTF-8 (kept by
    Python as surrogate escapes) become ``\\xNN``; valid names pass unchanged."""
    return name.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")


HIDDEN_WHY = "a hidden file (its name starts with a dot): not read; rename it to include it"


def dump_filename(name: str) -> str:
    """A feature-dump file name unique per input name: the whole name (extension
    included, so ``a.png`` and ``a.jpg`` differ) plus ``.pt``; a name with characters
    unsafe in file names gets them replaced and a short hash of the original added."""
    safe = re.sub(r"[^A-Za-z0-9._-]", "_", name).lstrip(".") or "input"
    if safe != name:
        safe += "-" + hashlib.sha256(name.encode()).hexdigest()[:8]
    return safe + ".pt"


def describe_input(obj: Any) -> str:
    if isinstance(obj, Image.Image):
        return obj.mode
    if isinstance(obj, torch.Tensor):
        layout = "HW" if obj.dim() == 2 else f"C{obj.shape[0]}HW" if obj.dim() == 3 else "?"
        return f"tensor {str(obj.dtype).replace('torch.', '')} {layout}"
    return type(obj).__name__


def _loader(fn: Callable[..., Any], *args: Any) -> Callable[[], Any]:
    """Bind arguments now (a bare lambda in a loop would see the last path)."""
    return lambda: fn(*args)


def _image_loader(path: Path, max_pixels: int, entry: CorpusEntry | None) -> Callable[[], Any]:
    """Load the image at ``path``; a note on how it was read goes onto ``entry`` (the
    package photos pass None: their rows carry no note)."""

    def load() -> Image.Image:
        image, note = open_image(path, max_pixels)
        if note is not None and entry is not None and note not in (entry.note or ""):
            entry.note = f"{entry.note}; {note}" if entry.note else note
        return image

    return load


def _rng(seed: int, salt: int) -> np.random.Generator:
    return np.random.default_rng([seed, salt])


def _noise(seed: int, salt: int, h: int, w: int, c: int) -> np.ndarray:
    return _rng(seed, salt).integers(0, 256, size=(h, w, c), dtype=np.uint8)


def _pil(arr: np.ndarray, mode: str) -> Image.Image:
    h, w = arr.shape[:2]
    return Image.frombytes(mode, (w, h), np.ascontiguousarray(arr).tobytes())


def _partial_alpha(seed: int, h: int, w: int) -> Image.Image:
    arr = _noise(seed, 7, h, w, 4)
    arr[: h // 3, :, 3] = 0  # fully transparent band
    arr[h // 3 : 2 * h // 3, :, 3] = 255  # opaque band; bottom third keeps random alpha
    return _pil(arr, "RGBA")


def _palette(seed: int, h: int, w: int, transparency: bool) -> Image.Image:
    im = _pil(_noise(seed, 11, h, w, 3), "RGB").quantize(colors=64, dither=Image.Dither.NONE)
    if transparency:
        im.info["transparency"] = 0
    return im


def _gradient(h: int, w: int) -> Image.Image:
    x = np.linspace(0, 255, w, dtype=np.float64)[None, :].repeat(h, 0)
    y = np.linspace(0, 255, h, dtype=np.float64)[:, None].repeat(w, 1)
    arr = np.stack([x, y, 255 - x], axis=-1).round().astype(np.uint8)
    return _pil(arr, "RGB")


def _i16(seed: int, h: int, w: int) -> Image.Image:
    arr = _rng(seed, 13).integers(0, 1024, size=(h, w), dtype=np.uint16)
    return Image.frombytes("I;16", (w, h), arr.astype("<u2").tobytes())


def flip_width(cfg: PreprocessConfig, height: int = 28, channels: int = 3) -> int:
    """The largest width (at ``height``) that the byte heuristic still defers.

    Past the one-side cap the plan's FP32 size stops growing while the raw size keeps
    growing, so the verdict flips exactly once; binary search for it."""

    def defers(w: int) -> bool:
        obj = torch.zeros((channels, height, 1), dtype=torch.uint8).expand(channels, height, w)
        return decide_request([obj], [plan_resize(w, height, cfg)]).defer

    lo, hi = 1, 1 << 20
    if defers(hi):
        raise ValueError("the byte heuristic never flips for this config")
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (mid, hi) if defers(mid) else (lo, mid)
    return lo


# Real photographs shipped as package data by optional dependencies (the photos extra).
PACKAGE_PHOTOS = (
    ("matplotlib", "mpl-data/sample_data/grace_hopper.jpg"),
    ("sklearn", "datasets/images/china.jpg"),
    ("sklearn", "datasets/images/flower.jpg"),
)
_DISTRIBUTION = {"matplotlib": "matplotlib", "sklearn": "scikit-learn"}


def _photo_path(pkg: str, rel: str) -> Path | None:
    spec = importlib.util.find_spec(pkg)
    if spec is None or not spec.submodule_search_locations:
        return None
    path = Path(next(iter(spec.submodule_search_locations))) / rel
    return path if path.is_file() else None


def package_photos() -> list[CorpusEntry]:
    """Real photographs shipped as package data: matplotlib's ``grace_hopper.jpg`` and
    scikit-learn's ``china.jpg`` and ``flower.jpg`` (read from disk, never imported)."""
    paths = [(pkg, _photo_path(pkg, rel)) for pkg, rel in PACKAGE_PHOTOS]
    return [
        CorpusEntry(
            f"photo_{p.stem}",
            f"package:{pkg}",
            _image_loader(p, 10**9, None),
            encoded=_loader(read_image_bytes, p),
        )
        for pkg, p in paths
        if p is not None
    ]


def missing_photos_note() -> str | None:
    """Which built-in photo inputs this install lacks and how to get them (None: none)."""
    missing = [
        (f"photo_{Path(rel).stem}", _DISTRIBUTION[pkg])
        for pkg, rel in PACKAGE_PHOTOS
        if _photo_path(pkg, rel) is None
    ]
    if not missing:
        return None
    names = ", ".join(f"{name} (from {dist})" for name, dist in missing)
    return (
        f"built-in inputs skipped: {names}: not installed; pip install "
        "'kimi-bench[plot,photos]' adds these real photographs"
    )


def builtin_corpus(cfg: PreprocessConfig, seed: int = 0) -> list[CorpusEntry]:
    """At least 24 deterministic inputs covering modes, tensor layouts, sizes and the
    byte-heuristic boundary (see the README for the full list)."""
    fw = flip_width(cfg)
    g = "generated"

    def rgb(salt: int, w: int, h: int) -> Callable[[], Any]:
        return lambda: _pil(_noise(seed, salt, h, w, 3), "RGB")

    def tensor(salt: int, shape: tuple[int, ...], dtype: torch.dtype = torch.uint8) -> Any:
        def make() -> torch.Tensor:
            t = torch.from_numpy(_rng(seed, salt).integers(0, 256, size=shape, dtype=np.uint8))
            return t if dtype == torch.uint8 else t.to(dtype)

        return make

    entries = [
        CorpusEntry("rgb_640x480", g, rgb(1, 640, 480)),
        CorpusEntry("rgb_57x29_odd", g, rgb(2, 57, 29)),
        CorpusEntry("rgb_1x1", g, rgb(3, 1, 1)),
        CorpusEntry("rgb_3x5_tiny", g, rgb(4, 3, 5)),
        CorpusEntry("rgb_448x448_mult28", g, rgb(5, 448, 448)),
        CorpusEntry("rgb_896x560_mult28", g, rgb(6, 896, 560)),
        CorpusEntry("gradient_700x300", g, lambda: _gradient(300, 700)),
        CorpusEntry("rgba_300x200_partial_alpha", g, lambda: _partial_alpha(seed, 200, 300)),
        CorpusEntry("la_120x90", g, lambda: _pil(_noise(seed, 8, 90, 120, 2), "LA")),
        CorpusEntry("l_333x111", g, lambda: _pil(_noise(seed, 9, 111, 333, 1), "L")),
        CorpusEntry(
            "bw_150x77_1bit", g, lambda: _pil(_noise(seed, 10, 77, 150, 1), "L").convert("1")
        ),
        CorpusEntry("p_96x64", g, lambda: _palette(seed, 64, 96, transparency=False)),
        CorpusEntry("p_96x64_transparency", g, lambda: _palette(seed, 64, 96, transparency=True)),
        CorpusEntry("i16_200x100_16bit", g, lambda: _i16(seed, 100, 200)),
        CorpusEntry("cmyk_160x120", g, lambda: _pil(_noise(seed, 12, 120, 160, 4), "CMYK")),
        CorpusEntry("tensor_c3_320x240", g, tensor(20, (3, 240, 320))),
        CorpusEntry("tensor_c4_200x150", g, tensor(21, (4, 150, 200))),
        CorpusEntry("tensor_c1_100x80", g, tensor(22, (1, 80, 100))),
        CorpusEntry("tensor_2d_90x60", g, tensor(23, (60, 90))),
        CorpusEntry("tensor_float32_64x48", g, tensor(24, (3, 48, 64), torch.float32)),
        CorpusEntry("large_4800x3600_downscaled", g, rgb(30, 4800, 3600)),
        CorpusEntry("extreme_8000x50", g, rgb(31, 8000, 50)),
        CorpusEntry(f"flip_deferred_{fw}x28", g, rgb(32, fw, 28)),
        CorpusEntry(f"flip_eager_{fw + 1}x28", g, rgb(33, fw + 1, 28)),
    ]
    return entries + package_photos()


def _refused(reason: str) -> Callable[[], Any]:
    def load() -> Any:
        raise InputError(reason)

    return load


def _folder_entry(path: Path, root: Path, max_pixels: int, follow_links: bool) -> CorpusEntry:
    name, src = display_name(path.name), display_name(str(path))
    if name.startswith("."):
        return CorpusEntry(name, src, _refused(HIDDEN_WHY))
    if path.is_symlink():
        try:
            target = path.resolve(strict=True)
        except (OSError, RuntimeError):
            return CorpusEntry(name, src, _refused("broken symbolic link: not read"))
        if not follow_links and not target.is_relative_to(root):
            why = (
                f"symbolic link to {target}, outside the folder: not followed "
                "(--follow-links allows it)"
            )
            return CorpusEntry(name, src, _refused(why))
    try:
        mode = os.stat(path).st_mode
    except OSError as exc:
        return CorpusEntry(name, src, _refused(f"cannot stat: {exc.strerror or exc}"))
    if stat.S_ISDIR(mode):
        why = "a subfolder: not read (only files directly in the --images folder are read)"
        return CorpusEntry(name + "/", src, _refused(why))
    if not stat.S_ISREG(mode):
        return CorpusEntry(
            name, src, _refused(f"a {file_kind(mode)}, not a regular file: not read")
        )
    if path.suffix.lower() in TENSOR_SUFFIXES:
        entry = CorpusEntry(name, src, _loader(open_tensor, path, max_pixels))
    else:
        entry = CorpusEntry(name, src, _refused("not loaded"))
        entry.load = _image_loader(path, max_pixels, entry)
        entry.encoded = _loader(read_image_bytes, path)
    if name != path.name:
        entry.note = "the file name is not valid UTF-8: shown with \\x escapes"
    return entry


def folder_corpus(
    folder: Path, max_pixels: int = DEFAULT_MAX_PIXELS, *, follow_links: bool = False
) -> list[CorpusEntry]:
    """One entry per name directly in ``folder`` (sorted; not recursive).

    Regular files are read: images with PIL (frame 0 of a multi-frame file, with a note),
    ``.pt``/``.pth``/``.npy`` as tensors, all under the ``max_pixels`` limit. Everything
    else gets an entry whose load raises InputError saying why it was not read: a
    subfolder (subfolders are not read; list their files in a folder of their own), a
    FIFO, socket or device, a broken link, a link whose target lies outside ``folder``
    (followed only with ``follow_links``), a hidden file (a name starting with a dot).
    Links inside the folder are followed. Names that are not UTF-8 are shown escaped."""
    if not folder.is_dir():
        raise InputError(f"--images {folder} is not a directory")
    root = folder.resolve()
    return [
        _folder_entry(path, root, max_pixels, follow_links) for path in sorted(folder.iterdir())
    ]
