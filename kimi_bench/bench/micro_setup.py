"""What a ``micro`` run is set up from, before any process starts: its job (from the
options), made once the checks that make a usage error of a run that cannot work hold
(``checked_job``: an eager arm, the images of a folder, each checked from its header, the
carrier's check of the runtime it needs)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from kimi_bench.domain.config import PreprocessConfig
from kimi_bench.domain.corpus import HIDDEN_WHY, display_name
from kimi_bench.domain.corpus_files import InputError, open_header, open_image
from kimi_bench.engine.micro_job import MicroJob
from kimi_bench.infra.fault_hooks import FaultHooks
from kimi_bench.infra.limits import DEFAULT_MAX_PIXELS
from kimi_bench.options import MicroOptions
from kimi_bench.pipeline import arms, carrier


def checked_job(
    opts: MicroOptions, cfg: PreprocessConfig, device: str, hosts_producers: bool,
    ranks_per_node: int, hooks: FaultHooks,
) -> MicroJob:  # fmt: skip
    """The run's job (its prefix and rendezvous left empty: the harness gives them), once
    what must hold before any process starts holds, as usage errors: an eager arm (every
    arm is checked against it), where this process hosts the producer a folder of
    --images with at least one usable image (each file checked from its header), and a
    carrier that can run here with these arms."""
    if not any(a.role == "baseline" for a in arms(opts.arms)):
        raise ValueError("--arms must include eager (every arm is checked against it)")
    paths = folder_images(opts.images) if opts.images and hosts_producers else ()
    job = micro_job(opts, cfg, device, "", "", paths, ranks_per_node, hooks)
    require_carrier(opts.transport, opts.arms, opts.runtime)  # it must run here, with these
    return job


def micro_job(
    opts: MicroOptions,
    cfg: PreprocessConfig,
    device: str,
    prefix: str,
    init_file: str,
    image_paths: tuple[str, ...],
    ranks_per_node: int,
    hooks: FaultHooks,
) -> MicroJob:
    return MicroJob(
        cfg=cfg,
        groups=opts.groups,
        content=opts.content,
        seed=opts.seed,
        ranks=opts.ranks or 1,
        transport=opts.transport,
        device=device,
        ranks_per_node=ranks_per_node,
        repeats=opts.repeats or 1,
        warmup=opts.warmup or 0,
        prefix=prefix,
        init_file=init_file,
        arms=opts.arms,
        runtime=opts.runtime_spec,
        repeat_share=opts.repeat_share,
        image_paths=image_paths,
        hooks=hooks,
        control_repeats=opts.control_repeats,
        decoder=opts.decoder,
        baseline_whitelisted=opts.eager_baseline == "deferral-off",
        profile_dir=str(opts.profile) if opts.profile else None,
        profile_repeats=opts.profile_repeats,
        launch=0,
    )


def scan_images(folder: Any) -> tuple[tuple[str, ...], list[str]]:
    """See :func:`_scan`; a folder scanned before in this process, unchanged since (names,
    sizes, times), is not decoded again (the CLI checks it before it claims the output)."""
    root = Path(folder)
    try:
        key = (str(root.resolve()), *((e.name, e.stat().st_size, e.stat().st_mtime_ns)
                                      for e in sorted(root.iterdir())))  # fmt: skip
    except OSError:
        return _scan(root)
    if key not in _SCANNED:
        _SCANNED.clear()
        _SCANNED[key] = _scan(root)
    return _SCANNED[key]


_SCANNED: dict[tuple[Any, ...], tuple[tuple[str, ...], list[str]]] = {}


def _scan(folder: Path) -> tuple[tuple[str, ...], list[str]]:
    """The image files of ``folder`` that micro can use (sorted, regular files PIL opens,
    within the pixel limit parity applies) and one line per name left out, saying why:
    a decompression bomb, a file PIL cannot open, a hidden file or a subfolder is skipped,
    as parity refuses it. A file whose header opens but whose pixels do not decode (a
    truncated JPEG) is a ValueError naming it: every worker would fail on it."""
    root = Path(folder)
    if not root.is_dir():
        raise ValueError(
            f"--images {root} is not a folder (for generated images use --synthetic "
            "COUNTxWIDTHxHEIGHT, e.g. 4x1536x1024)"
        )
    out, skipped = [], []
    for p in sorted(root.iterdir()):
        name = display_name(p.name)
        if name.startswith("."):
            skipped.append(f"{name}: {HIDDEN_WHY}")
            continue
        if not p.is_file():
            skipped.append(f"{name}: not a regular file (subfolders are not read)")
            continue
        try:
            _probe_image(p, DEFAULT_MAX_PIXELS)
        except InputError as exc:
            skipped.append(f"{name}: {exc}")
            continue
        out.append(str(p))
    if not out:
        why = f" ({'; '.join(skipped[:5])})" if skipped else ""
        raise ValueError(f"--images {root} holds no image PIL can open{why}")
    return tuple(out), skipped


def _probe_image(path: Path, max_pixels: int) -> None:
    """Open the header (InputError for what parity would refuse: skipped), then decode it
    (ValueError naming the file when that fails: the run would fail in its workers)."""
    open_header(path, max_pixels).close()
    try:
        open_image(path, max_pixels)
    except InputError as exc:
        raise ValueError(
            f"--images {display_name(str(path))}: {exc}; micro cannot use it (parity gives "
            "it its own row): remove it from the folder"
        ) from None


def folder_images(folder: Any) -> tuple[str, ...]:
    """Every usable image file in ``folder`` (see :func:`scan_images`)."""
    return scan_images(folder)[0]


def require_carrier(transport: str, arm_names: Sequence[str], runtime: str) -> None:
    """A carrier that cannot run here (the runtime's need sglang), or not with these arms
    under this runtime profile, is a usage error (with the install hint) here, before any
    worker starts, rather than a failed worker."""
    c = carrier(transport)
    c.check(arms(arm_names), runtime)
    try:
        c.require()
    except RuntimeError as exc:  # SglangUnavailable and the like
        raise ValueError(str(exc)) from None
