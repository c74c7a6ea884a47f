"""THE pipeline, once: producer step, carrier steps, rank step, each with a timing hook and
the copy ledger. ``parity`` runs it in one process (ranks in turn); ``micro`` and
``serve-ab`` run the same functions in real processes (``engine/micro_worker.py``,
``engine/serve_workers.py`` hold only process plumbing).

Arms are choices of steps, not copies of code:

- ``eager``: the runtime *before* the change. The producer stages every image, preprocesses
  it on its device and copies the FP32 patches to the host; the scheduler's model class is
  not whitelisted, so every rank moves every item to its device (pre-embed move).
- ``deferred``: the runtime with the change. The deferral policy decides per request or per
  image (runtime profile); deferred images travel as raw uint8 with their record, images
  above the byte heuristic go eager inside the arm (a mixed batch, in input order). The
  model class is whitelisted: no pre-embed move; only the owner copies its raw images to its
  device and materializes them.
- ``deferred-decode``: **proposed, not in the runtime** (``kimi_bench.domain.encoded``). Inputs
  that arrive encoded (JPEG/PNG/WebP bytes) are planned from their header alone and
  travel as their encoded bytes (a 1-D uint8 feature, any carrier); only the owner
  decodes them, with the producer's decode path, and stages and materializes as in
  ``deferred``. An input the header cannot vouch for (``encoded.route_reason``) is routed
  to the raw-uint8 deferred path; its decision's reason says why.
- ``zero-copy``: **proposed, not in the runtime** (section at the end of this module). The
  producer writes each deferred image's decoded pixels once, straight into a slot of a
  shared-memory arena (``kimi_bench.pipeline.arena``); only slot metadata is pickled and broadcast;
  each owner copies its images to its device straight from the (page-locked) arena.

Every byte-moving operation is written to ``Step.ledger`` (``kimi_bench.domain.ledger``) as it
runs; ``Step.hook.mark(stage)`` closes a timed stage (after a device synchronize).

After the rank step, ``gather`` (``pipeline/gather.py``) is the encoder-output gather: real
tensors over the NCCL device group when every rank has its own GPU, metadata only otherwise.
"""

from kimi_bench.pipeline.carriers import CarrierSteps, carrier_steps, register_carrier
from kimi_bench.pipeline.in_process import (
    OwnerOutput,
    deferred_item,
    eager_item,
    run_arm,
    run_deferred,
    run_eager,
    run_in_process,
)
from kimi_bench.pipeline.step import (
    ARMS,
    CPU_STAND_IN,
    DEFERRED_MODEL_CLASS,
    EAGER_MODEL_CLASS,
    STAGES,
    ClockHook,
    Hook,
    NoHook,
    RankOutput,
    Step,
)
from kimi_bench.pipeline.steps import (
    arena_to_device,
    broadcast,
    decide,
    decode_input,
    deserialize,
    gather,
    owner_decode,
    produce,
    rank_step,
    record_ipc,
    serialize,
    stage,
    take,
    to_device,
    to_host,
    wrap,
)
from kimi_bench.pipeline.zero_copy import (
    ZERO_COPY,
    ZERO_COPY_LABEL,
    feature_bytes,
    held_slots,
    produce_zero_copy,
    release_slots,
    stage_into_arena,
    wrap_zero_copy,
)

__all__ = [
    "ARMS", "CPU_STAND_IN", "DEFERRED_MODEL_CLASS", "EAGER_MODEL_CLASS", "STAGES",
    "ZERO_COPY", "ZERO_COPY_LABEL", "CarrierSteps", "ClockHook", "Hook", "NoHook",
    "OwnerOutput", "RankOutput", "Step", "arena_to_device", "broadcast", "carrier_steps",
    "decide", "decode_input", "deferred_item", "deserialize", "eager_item", "feature_bytes",
    "gather", "held_slots", "owner_decode", "produce", "produce_zero_copy", "rank_step",
    "record_ipc", "register_carrier", "release_slots", "run_arm", "run_deferred", "run_eager",
    "run_in_process", "serialize",
    "stage", "stage_into_arena", "take", "to_device", "to_host", "wrap", "wrap_zero_copy",
]  # fmt: skip
