"""A folder of real JPEGs for decoded-pixel parity (issue 30), written from the two
published photographs scikit-learn ships (china.jpg, flower.jpg; the ``photos`` extra):

    python scripts/jpeg-corpus.py OUTDIR

Each photo is resized (Lanczos) to 1536x1024 and saved baseline and progressive, with
4:4:4, 4:2:2 and 4:2:0 chroma subsampling, at quality 75 and 95 (24 files); the two
published photos as they ship (640x427, baseline 4:2:0); one grayscale JPEG (one
component: the PR era's nvJPEG returns one channel) and one PNG (not a JPEG: every
profile decodes it with PIL). The names say how each file was saved (the folder holds the
images alone: parity reads every file in it); the listing goes to stdout as JSON.
Deterministic: the same bytes from the same Pillow/libjpeg."""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

from PIL import Image, features

SUBSAMPLING = {"444": 0, "422": 1, "420": 2}
QUALITIES = (75, 95)
SIZE = (1536, 1024)


def _sources() -> dict[str, Path]:
    import sklearn.datasets  # optional: the photos extra

    folder = Path(sklearn.datasets.__file__).parent / "images"
    return {name: folder / f"{name}.jpg" for name in ("china", "flower")}


def main(out: Path) -> int:
    out.mkdir(parents=True, exist_ok=True)
    listing: list[dict[str, object]] = []

    def add(path: Path, **how: object) -> None:
        listing.append({"file": path.name, "bytes": path.stat().st_size, **how})

    for name, src in _sources().items():
        shutil.copyfile(src, out / f"{name}-published.jpg")
        add(out / f"{name}-published.jpg", source=name, saved="as published")
        photo = Image.open(src).convert("RGB").resize(SIZE, Image.Resampling.LANCZOS)
        for mode, progressive in (("baseline", False), ("progressive", True)):
            for sub, code in SUBSAMPLING.items():
                for q in QUALITIES:
                    path = out / f"{name}-{SIZE[0]}x{SIZE[1]}-{mode}-{sub}-q{q}.jpg"
                    photo.save(path, "JPEG", quality=q, subsampling=code, progressive=progressive)
                    add(path, source=name, mode=mode, subsampling=sub, quality=q)
        if name == "china":
            gray = out / f"{name}-{SIZE[0]}x{SIZE[1]}-grayscale-q90.jpg"
            photo.convert("L").save(gray, "JPEG", quality=90)
            add(gray, source=name, mode="baseline", subsampling="gray", quality=90)
            png = out / f"{name}-{SIZE[0]}x{SIZE[1]}.png"
            photo.save(png, "PNG")
            add(png, source=name, saved="PNG")
    meta = {"pillow": Image.__version__, "libjpeg_turbo": features.version("libjpeg_turbo")}
    print(json.dumps({"folder": str(out), "made_with": meta, "files": listing}, indent=1))
    return 0


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: python scripts/jpeg-corpus.py OUTDIR")
    sys.exit(main(Path(sys.argv[1])))
