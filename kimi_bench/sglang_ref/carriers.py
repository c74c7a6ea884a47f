"""The runtime's own carrier steps: ``micro --carrier sglang-shm|sglang-pickle``.

Same role and signatures as ``kimi_bench.pipeline.wrap`` / ``broadcast`` / ``take``, but the
bytes are moved by the installed SGLang release's functions, as its tokenizer manager and
scheduler call them:

- :func:`wrap` (producer): builds the runtime's ``TokenizedGenerateReqInput`` around the
  items and calls ``wrap_shm_features`` (shm: ``ShmPointerMMData`` per CPU feature;
  pickle: the default tensor transport returns the request unchanged);
- :func:`broadcast` (ranks): ``broadcast_pyobj([request], rank, group, src=0)``;
- :func:`take` (ranks): ``unwrap_shm_features`` when ``has_shm_features`` says so (each
  ``ShmPointerMMData.materialize`` maps or clones its segment, then unlinks it).

Each step writes the same ledger ops as kimi-bench's own carriers (so the two ledgers
compare row for row) with ``mirrors`` naming the runtime function that ran. What can be
observed is observed rather than assumed: the bytes put in shared memory are the sizes the
runtime's ``ShmPointerMMData`` records; the pickles and gloo broadcasts inside
``broadcast_pyobj`` are counted and sized by stand-ins for its ``pickle`` and ``dist``
module globals (which forward every call), and data pointers tell whether the sender's
buffer was wrapped or copied and whether the receiver copied the received buffer; a
receiver's ``map`` or ``clone`` is read from ``/proc/self/map_files`` (is the tensor's
memory a mapping of the segment file?).

Importing this module does not import sglang; :func:`configure` does (once per process,
before anything is timed).
"""

from __future__ import annotations

import importlib.util
import mmap
import os
import sys
import warnings
from collections.abc import Iterable, Sequence
from typing import Any

import torch

from kimi_bench.domain.contract import MMItem
from kimi_bench.domain.ledger import tensor_bytes
from kimi_bench.pipeline.carriers import Carrier, register_carrier
from kimi_bench.pipeline.step import Step
from kimi_bench.pipeline.transport import cleanup_segments
from kimi_bench.sglang_ref.calls import IMAGE_TOKEN_ID
from kimi_bench.sglang_ref.runtime import (
    INSTALL_HINT,
    MANAGER_MM,
    Runtime,
    SglangMissingError,
    _installed_version,
    load_runtime,
)
from kimi_bench.sglang_ref.spies import address, spied

TRANSPORTS = ("sglang-shm", "sglang-pickle")
RELEASE_PROFILE = "sglang-0.5.23"  # the runtime profile of the installed release
# ShmPointerMMData names its segments make_shm_name("mm"): sgl_shm_mm_<pid>_<8 hex digits>
SEGMENT_PREFIX = "sgl_shm_mm_"
TAG = "sglang: "  # every ledger row written here starts its ``mirrors`` with this
# mm_utils caches "is the tensor transport the default (inline) one?" in this global
_DEFAULT_TRANSPORT = "_is_default_tensor_transport"

_STATE: dict[str, Any] = {}


# ------------------------------------------------------------------------- process set-up


def require_installed(transport: str) -> None:
    """Cheap check for the parent process (sglang is not imported): raise
    :class:`SglangMissingError` with the install hint when sglang is absent."""
    if transport in TRANSPORTS and importlib.util.find_spec("sglang") is None:
        raise SglangMissingError(
            f"--carrier {transport} needs the SGLang runtime, which is not installed for "
            f"{sys.executable}; {INSTALL_HINT}"
        )


def configure(transport: str) -> Runtime:
    """Load the runtime and set this process up as the runtime's carrier expects: server
    arguments published with ``skip_tokenizer_init=False`` (once per process) and the
    tensor transport of ``transport`` (shared memory or the default, inline one)."""
    if transport not in TRANSPORTS:
        raise ValueError(f"unknown runtime carrier {transport!r}; expected {TRANSPORTS}")
    rt = load_runtime()
    if "override" not in _STATE:
        override = rt.sym("get_context")().override_server_args(skip_tokenizer_init=False)
        override.install()
        _STATE["override"] = override
        # broadcast_pyobj wraps its read-only pickle in a tensor (no copy); torch warns once
        warnings.filterwarnings("ignore", "The given NumPy array is not writable", UserWarning)
    setattr(rt.modules[MANAGER_MM], _DEFAULT_TRANSPORT, transport == "sglang-pickle")
    return rt


def release() -> None:
    """Undo :func:`configure` (for tests that share a process with other runtime calls)."""
    override = _STATE.pop("override", None)
    if override is not None:
        override.restore()
        setattr(load_runtime().modules[MANAGER_MM], _DEFAULT_TRANSPORT, None)


class RuntimeCarrier(Carrier):
    """The installed SGLang runtime's own carrier functions (``sglang-shm`` through shared
    memory on one node, ``sglang-pickle`` inline): kimi-bench's ledger ops, the runtime's
    code doing the work."""

    runtime = True

    def __init__(self, name: str) -> None:
        super().__init__(name)
        self._has_shm: Any = None

    def require(self) -> None:
        require_installed(self.name)

    def check(self, arms: Sequence[Any], runtime: str) -> None:
        """The runtime's carriers are the installed release's: only its profile fits, and
        they carry the runtime's arms, not an arm that needs kimi-bench's arena."""
        if runtime != RELEASE_PROFILE:
            raise ValueError(
                f"carrier (--transport/--carrier) {self.name} runs the installed SGLang "
                f"release's carrier (0.5.23 behaviour): use --runtime {RELEASE_PROFILE}, not "
                f"{runtime}"
            )
        for a in arms:
            if a.needs_arena:
                raise ValueError(
                    f"carrier {self.name} carries the runtime's arms (eager, deferred); the "
                    f"proposed {a.name} arm runs with --carrier shm or pickle"
                )

    def prepare(self) -> None:
        rt = configure(self.name)
        self._has_shm = rt.sym("has_shm_features")

    def note(self) -> str | None:
        return describe(self.name)

    def leftovers(self, pids: Iterable[int]) -> list[str]:
        return cleanup_runtime_segments(pids)

    def segment_prefixes(self, pids: Iterable[int]) -> list[str]:
        return segment_prefixes(pids)

    def wrap(self, step: Step, items: list[MMItem], prefix: str) -> Any:
        return wrap(step, items, self.name, prefix)

    def broadcast(self, step: Step, obj: Any, rank: int, world: int, group: Any = None) -> Any:
        return broadcast(step, obj, rank, world, group)

    def take(self, step: Step, packed: Any) -> tuple[list[MMItem], list[str]]:
        return take(step, packed)

    def holds_segments(self, packed: Any) -> bool:
        if self._has_shm is None:
            self.prepare()
        return bool(self._has_shm([packed]))


class RuntimeShm(RuntimeCarrier):
    uses_segments = True
    spans_nodes = False
    serialize_op = "shm_copy_in"


def describe(transport: str) -> str:
    """The report's note: which runtime functions carried the features (no import)."""
    version = _installed_version()
    if transport == "sglang-shm":
        return (
            f"carrier sglang-shm: the installed SGLang {version}'s own functions carried the "
            "features: wrap_shm_features (ShmPointerMMData: one copy into a "
            f"{SEGMENT_PREFIX}<pid>_* segment per CPU feature) at the producer, "
            "broadcast_pyobj to the ranks, unwrap_shm_features (ShmPointerMMData.materialize, "
            "which unlinks) on every rank after a barrier. Ledger rows whose mirrors start "
            f"with '{TAG.strip()}' were written from what those calls did."
        )
    if transport == "sglang-pickle":
        return (
            f"carrier sglang-pickle: the installed SGLang {version}'s own functions carried "
            "the features: wrap_shm_features under the default (inline) tensor transport "
            "returned them unchanged, broadcast_pyobj pickled them inline; "
            "unwrap_shm_features had nothing to do (has_shm_features is false), as in the "
            f"scheduler. Ledger rows whose mirrors start with '{TAG.strip()}' were written "
            "from what those calls did."
        )
    raise ValueError(f"unknown runtime carrier {transport!r}")


def segment_prefixes(pids: Iterable[int]) -> list[str]:
    return [f"{SEGMENT_PREFIX}{pid}_" for pid in pids]


def cleanup_runtime_segments(pids: Iterable[int]) -> list[str]:
    """Unlink the runtime's segments created by these processes (also after a failure)."""
    removed: list[str] = []
    for prefix in segment_prefixes(pids):
        removed += cleanup_segments(prefix)
    return removed


# ---------------------------------------------------------------------------- producer


def request(rt: Runtime, items: list[MMItem]) -> Any:
    """The runtime's ``TokenizedGenerateReqInput`` carrying ``items`` as image
    ``MultimodalDataItem``s (features and model-specific data as they are; no prompt)."""
    item_cls, modality = rt.sym("MultimodalDataItem"), rt.sym("Modality")
    mm_items = [
        item_cls(
            modality=modality.IMAGE,
            feature=it.feature,
            model_specific_data=dict(it.model_specific_data),
        )
        for it in items
    ]
    mm_inputs = rt.sym("MultimodalProcessorOutput")(
        input_ids=[], mm_items=mm_items, im_token_id=IMAGE_TOKEN_ID
    )
    return rt.sym("TokenizedGenerateReqInput")(
        input_text="",
        input_ids=[],
        input_embeds=None,
        mm_inputs=mm_inputs,
        token_type_ids=None,
        sampling_params=None,
        return_logprob=False,
        logprob_start_len=-1,
        top_logprobs_num=0,
        token_ids_logprob=None,
        stream=False,
    )


def wrap(step: Step, items: list[MMItem], carrier: str, prefix: str = "") -> Any:
    """Producer side: the request after the runtime's ``wrap_shm_features``. ``prefix`` is
    not used: the runtime names its own segments (``SEGMENT_PREFIX<pid>_...``)."""
    rt = configure(carrier)
    req = request(rt, items)
    contiguous = [it.feature.is_contiguous() for it in items]
    req = rt.sym("wrap_shm_features")(req)
    shm_cls = rt.sym("ShmPointerMMData")
    for was_contiguous, it in zip(contiguous, req.mm_inputs.mm_items, strict=True):
        f = it.feature
        if not isinstance(f, shm_cls):  # inline: default transport, or /dev/shm was full
            continue
        nbytes = _shm_bytes(f)
        if not was_contiguous:
            step.ledger.add(
                "serialize", "hwc_to_chw", "host", "host", nbytes,
                TAG + "ShmPointerMMData: .contiguous()",
            )  # fmt: skip
        step.ledger.add(  # the segment is sized with posix_fallocate before the copy
            "serialize", "shm_fallocate", "shm", "shm", nbytes,
            TAG + "ShmPointerMMData: posix_fallocate",
        )  # fmt: skip
        step.ledger.add("serialize", "shm_copy_in", "host", "shm", nbytes, TAG + "ShmPointerMMData")
    return req


def _shm_bytes(ptr: Any) -> int:
    """The bytes a ``ShmPointerMMData`` put in its segment (its recorded shape and dtype)."""
    return int(torch.Size(ptr.shape).numel()) * torch.empty((), dtype=ptr.dtype).element_size()


# ------------------------------------------------------------------------------- ranks


def broadcast(step: Step, obj: Any, rank: int, world: int, group: Any = None) -> Any:
    """``broadcast_pyobj([obj], rank, group, src=0)`` (the scheduler broadcasts only when
    there is more than one rank). Ledger: rank 0's pickle and its gloo broadcast of the
    data (the int64 size broadcast is not pixel bytes, as in kimi-bench's own); every
    other rank's copy of the buffer into ``bytes`` (when its address differs from the
    received tensor's) and its unpickle."""
    if world == 1:
        return obj
    rt = load_runtime()
    with spied(rt) as (p, d):
        out = rt.sym("broadcast_pyobj")([obj] if rank == 0 else None, rank, group, src=0)
    data = [t for t in d.sent if t.dtype == torch.uint8]
    fn = TAG + "broadcast_pyobj"
    if rank == 0:
        for blob in p.dumped:
            step.ledger.add("broadcast", "pickle", "host", "host", len(blob), fn + ": pickle.dumps")
        for t, blob in zip(data, p.dumped, strict=False):
            if t.data_ptr() != address(blob):  # the send buffer is a copy of the pickle
                step.ledger.add(
                    "broadcast", "bytes_copy", "host", "host", len(blob), fn + ": ByteTensor"
                )
        for t in data:
            step.ledger.add(
                "broadcast", "gloo_broadcast", "host", "wire", tensor_bytes(t) * (world - 1),
                fn + ": dist.broadcast", count=world - 1,
            )  # fmt: skip
        return obj
    for t, blob in zip(data, p.loaded, strict=False):
        if address(blob) != t.data_ptr():
            step.ledger.add("broadcast", "bytes_copy", "host", "host", len(blob), fn + ": bytes()")
    for blob in p.loaded:
        step.ledger.add("broadcast", "unpickle", "host", "host", len(blob), fn + ": pickle.loads")
    return out[0]


def take(step: Step, obj: Any) -> tuple[list[MMItem], list[str]]:
    """A rank takes its request's features: ``unwrap_shm_features`` when
    ``has_shm_features`` (as the scheduler gates it). Returns kimi-bench items and the
    segment names (already unlinked by the runtime's ``materialize``)."""
    rt = load_runtime()
    shm_cls = rt.sym("ShmPointerMMData")
    mm_items = obj.mm_inputs.mm_items
    pointers = [
        (i, it.feature.shm_name, _shm_bytes(it.feature))
        for i, it in enumerate(mm_items)
        if isinstance(it.feature, shm_cls)
    ]
    if rt.sym("has_shm_features")([obj]):
        rt.sym("unwrap_shm_features")(obj)
    for i, name, nbytes in pointers:
        op, verified = receiver_copy(mm_items[i].feature, name, nbytes)
        how = "ACCESS_COPY map" if op == "map" else "clone"
        mirrors = f"{TAG}unwrap_shm_features: materialize ({how})"
        if not verified:
            mirrors += " [not verified: /proc/self/map_files unreadable]"
        step.ledger.add("take_copy", op, "shm", "host", nbytes, mirrors)
    out = [MMItem(it.feature, it.model_specific_data) for it in mm_items]
    return out, [name for _, name, _ in pointers]


def receiver_copy(t: torch.Tensor, name: str, nbytes: int) -> tuple[str, bool]:
    """("map", True) when ``t``'s memory is a mapping of segment ``name`` (no byte copied),
    ("clone", True) when it is not; (the runtime's rule for this platform, False) when the
    mapping cannot be read here."""
    page = mmap.PAGESIZE
    start = t.data_ptr()
    if nbytes <= 0 or start % page:
        return "clone", True  # a mapping starts on a page boundary
    end = start + -(-nbytes // page) * page
    try:
        target = os.readlink(f"/proc/self/map_files/{start:x}-{end:x}")
    except FileNotFoundError:
        return "clone", True
    except OSError:
        return ("map" if sys.platform == "linux" else "clone"), False
    return ("map" if target.removesuffix(" (deleted)").endswith("/" + name) else "clone"), True


register_carrier("sglang-shm", RuntimeShm)
register_carrier("sglang-pickle", RuntimeCarrier)
