"""``parity --runtime vllm-0.33``: vLLM 0.33's K3 path through the one pipeline, per input.

Every input travels as a client sends it (its file's bytes; a generated image as PNG)
through the ``vllm-uint8`` arm: the API server's uint8 patches, ``vllm-mq`` to every rank,
pinned staging, H2D and the fused normalisation (``pipeline.vllm_steps``). Each row holds:

- ``bit_exact_bf16``: the ranks' BF16 features equal (``torch.equal``) vLLM's path done
  directly (``domain.vllm_k3``: decode, resize, patchify, normalise): the carriers and the
  rank step kept vLLM's features;
- the cross-runtime view (``bench.cross_runtime``): vLLM's size, grid and token count
  beside SGLang's K3 path's, and how many BF16 values differ from SGLang's and from the
  checkpoint's PIL reference;
- with ``--reference vllm`` (the environment of ``scripts/vllm-env.sh``): whether the
  uint8 patches and grid equal vLLM's own processor's and the ranks' BF16 equal the
  normalisation of vLLM's own patches.

The built-in corpus gains the inputs where vLLM differs from SGLang by design
(``domain.vllm_corpus``: EXIF-rotated JPEGs, transparency). A tensor input has no vLLM
path (the API server takes images): its row says so.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import torch

from kimi_bench.bench.cross_runtime import compare_runtimes, vllm_bf16
from kimi_bench.bench.parity_decode import encoded_input
from kimi_bench.bench.parity_outputs import parity_report
from kimi_bench.domain import vllm_k3
from kimi_bench.domain.config import PreprocessConfig, resolve_config
from kimi_bench.domain.corpus import CorpusEntry, builtin_corpus, folder_corpus
from kimi_bench.domain.corpus_files import InputError
from kimi_bench.domain.encoded import EncodedImage
from kimi_bench.domain.navit import plan_resize
from kimi_bench.domain.runtime import VLLM, get_profile
from kimi_bench.domain.vllm_corpus import by_design_entries
from kimi_bench.infra.environment import HostLoad, host_load, resolve_device
from kimi_bench.options import ParityOptions
from kimi_bench.pipeline import recipe_record, run_arm
from kimi_bench.report.model import Report
from kimi_bench.results import derive_parity, parity_rows

ARM = get_profile("vllm-0.33").default_arms[0]  # vLLM's one arm: vllm-uint8
NO_TENSORS = "vLLM's API server takes images (encoded bytes), not tensors: no vLLM path"


def _row(entry: CorpusEntry, keys: Sequence[str]) -> dict[str, Any]:
    """Every key a parity row has (``keys``: parity's), filled as the input goes on."""
    row: dict[str, Any] = dict.fromkeys(keys)
    return row | {"name": entry.name, "source": entry.source, "deferred": False}


def _prepare(
    entry: CorpusEntry, cfg: PreprocessConfig, keys: Sequence[str]
) -> tuple[dict[str, Any], bytes | None]:
    """The row with the cross-runtime view filled, and the input's encoded bytes (None: a
    row with its error)."""
    row = _row(entry, keys)
    try:
        obj = entry.load()
        enc = encoded_input(entry, obj)
        if enc is None:
            raise InputError(NO_TENSORS)
        cross = compare_runtimes(entry.name, enc.data, cfg)
    except (InputError, ValueError, OSError) as exc:
        row["error"] = f"{type(exc).__name__}: {exc}".splitlines()[0]
        return row, None
    row.update(
        mode=getattr(obj, "mode", None),
        width=cross.stored_size[0],
        height=cross.stored_size[1],
        vllm_size=list(cross.vllm_size),
        grid_thw=list(cross.vllm_grid),
        num_tokens=cross.vllm_tokens,
        sglang_grid_thw=list(cross.sglang_grid),
        sglang_tokens=cross.sglang_tokens,
        tokens_differ=cross.tokens_differ,
        exif_rotated=cross.exif_rotated,
        composited_white=cross.composited_white,
        vs_sglang_differing=cross.vllm_vs_sglang.differing,
        vs_sglang_max_abs=cross.vllm_vs_sglang.max_abs,
        max_abs_diff_vs_pil=cross.vllm_vs_pil_reference.max_abs,
    )
    return row, enc.data


def _run_batch(
    batch: Sequence[tuple[dict[str, Any], bytes]],
    opts: ParityOptions,
    cfg: PreprocessConfig,
    dev: torch.device,
    reference: Any,
) -> dict[str, list[str]]:
    """The batch as one request through the one pipeline, each row's verdicts filled."""
    inputs = [EncodedImage(data) for _, data in batch]
    plans = [plan_resize(i.width, i.height, cfg) for i in inputs]
    out = run_arm(ARM, inputs, plans, cfg, opts.ranks, dev, dev, runtime=opts.runtime_spec)
    data_mode = get_profile(opts.runtime_spec).encoder_tp_mode == "data"
    for i, ((row, data), got) in enumerate(zip(batch, out.bf16, strict=True)):
        own = vllm_k3.preprocess(vllm_k3.decode(data), cfg)
        row["bit_exact_bf16"] = bool(torch.equal(got, vllm_bf16(own, cfg).to(got.device)))
        row["owner_rank"] = out.owners[i] if data_mode else None
        if reference is not None:
            row.update(_against_reference(reference, data, cfg, own, got))
    return recipe_record(*out.trails[:2])


def _against_reference(
    ref: Any, data: bytes, cfg: PreprocessConfig, own: vllm_k3.Patches, got: torch.Tensor
) -> dict[str, Any]:
    try:
        theirs, grid = ref.patches(data, cfg)
    except Exception as exc:  # vLLM's own code raising is a finding, named in the row
        return {"reference_identical": False, "reference_detail": f"vllm raised {exc!r}"[:300]}
    same_patches = bool(torch.equal(own.patches, theirs))
    same_grid = tuple(grid[0].tolist()) == own.grid_thw
    normalised = vllm_k3.normalize_bf16(theirs, cfg).reshape(got.shape)
    same_bf16 = bool(torch.equal(got, normalised.to(got.device)))
    detail = [w for w, ok in (("uint8 patches", same_patches), ("grid", same_grid),
                              ("ranks' BF16", same_bf16)) if not ok]  # fmt: skip
    return {
        "reference_identical": not detail,
        "reference_detail": ("differs: " + ", ".join(detail)) if detail else None,
    }


def run_vllm_parity(
    opts: ParityOptions,
    progress: Callable[[str, int, int], None] | None = None,
    cfg: PreprocessConfig | None = None,
    reference: Any = None,
    keys: Sequence[str] = (),
) -> Report:
    """Every input through the ``vllm-uint8`` arm; ``reference``: ``vllm_ref.load()``'s (None:
    no vLLM reference); ``keys``: the keys of a parity row (``parity.RESULT_KEYS``)."""
    cfg = cfg or resolve_config(opts.preset, opts.config)
    load_start = host_load()
    dev = resolve_device(opts.device)
    entries = (
        folder_corpus(opts.images, opts.max_pixels, follow_links=opts.follow_links)
        if opts.images is not None
        else builtin_corpus(cfg, opts.seed) + by_design_entries()
    )
    rows: list[dict[str, Any]] = []
    pending: list[tuple[dict[str, Any], bytes]] = []
    recipe: dict[str, list[str]] = {}
    left_out: list[str] = []  # the built-in corpus's tensors: no vLLM path, not an error
    for n, entry in enumerate(entries, 1):
        row, data = _prepare(entry, cfg, keys)
        if data is None and opts.images is None and str(row["error"]).endswith(NO_TENSORS):
            left_out.append(entry.name)
        else:
            rows.append(row)
        if data is not None:
            pending.append((row, data))
        if pending and (len(pending) >= opts.batch_size or n == len(entries)):
            try:
                recipe = _run_batch(pending, opts, cfg, dev, reference) or recipe
            except (RuntimeError, ValueError, OSError) as exc:
                for r, _ in pending:
                    r["error"] = f"{type(exc).__name__}: {exc}".splitlines()[0]
            pending = []
        if progress:
            progress(entry.name, n, len(entries))
    report = _report(opts, cfg, rows, dev, load_start, reference)
    report.data["recipe"] = {ARM: recipe}
    if left_out:
        report.notes.append(
            f"{len(left_out)} tensor input(s) of the built-in corpus left out ("
            f"{', '.join(left_out)}): {NO_TENSORS}."
        )
    return report


def _report(
    opts: ParityOptions,
    cfg: PreprocessConfig,
    rows: list[dict[str, Any]],
    dev: torch.device,
    load_start: HostLoad,
    reference: Any,
) -> Report:
    ok = [r for r in rows if r["error"] is None]
    derived = derive_parity(parity_rows(rows, fp32=False), fp32=False)
    differing = list(derived.differing)
    tokens = [r["name"] for r in ok if r["tokens_differ"]]
    ref_differ = [r["name"] for r in ok if r.get("reference_identical") is False]
    verdict = (
        "NO INPUTS: nothing was accepted"
        if not ok
        else f"DIFFERS: {len(differing)} of {len(ok)} inputs ({', '.join(differing)})"
        if differing
        else f"BIT-IDENTICAL: {len(ok)} of {len(ok)} accepted inputs: the ranks' BF16 "
        f"features equal vLLM 0.33's path ({len(rows) - len(ok)} rejected with an error)"
    )
    summary: dict[str, Any] = {
        "verdict": verdict,
        **derived.summary_fields(),  # all_bit_exact_fp32 None: vLLM has no FP32 features
        "tokens_differ_from_sglang": tokens,
        "exif_rotated": [r["name"] for r in ok if r["exif_rotated"]],
        "composited_white": [r["name"] for r in ok if r["composited_white"]],
        "identical_to_sglang": sum(1 for r in ok if r["vs_sglang_differing"] == 0),
    }
    notes = [
        "runtime vllm-0.33: every input through the vllm-uint8 arm (API server uint8 patches, "
        "vllm-mq to every rank, pinned staging + H2D, fused normalise); bit_exact_bf16 "
        "holds the ranks' BF16 against vLLM's path done directly (torch.equal).",
        "token count differs from SGLang's K3 path on: " + (", ".join(tokens) or "no input"),
    ]
    if reference is not None:
        summary["reference"] = {
            "runtime": VLLM,
            "vllm_version": reference.version,
            "identical": len(ok) - len(ref_differ),
            "differing": ref_differ,
        }
        if ref_differ:
            summary["verdict"] = f"DIFFERS FROM VLLM: {', '.join(ref_differ)}"
        else:
            summary["verdict"] += f"; identical to vllm {reference.version} on every input"
    return parity_report(opts, cfg, dev, load_start, rows, summary, notes)
