"""THE pipeline, once (``pipeline/recipe.py``: the sequence; ``pipeline/steps.py``: the
steps): producer step, carrier steps, rank step, each with a timing hook and the copy
ledger. ``parity`` runs it in one process (ranks in turn); ``micro`` and ``serve-ab`` run
the same recipe in real processes (``engine/micro_worker.py``, ``engine/serve_workers.py``
hold only process plumbing).

Arms are objects that choose steps (``pipeline/arms/``: ``eager``, the runtime before the
change; ``deferred``, the change; ``zero-copy`` and ``deferred-decode``, proposed, not in
the runtime); carriers are objects that move features (``pipeline/carriers/``: ``shm``,
``pickle``; the installed runtime's ``sglang-shm``/``sglang-pickle`` from
``kimi_bench.sglang_ref``). Both are chosen once by name, in each process
(``recipe.choose_once``; ``recipe.make_step`` for a single step).

Every byte-moving operation is written to ``Step.ledger`` (``kimi_bench.domain.ledger``) as
it runs; ``Step.hook.mark(stage)`` closes a timed stage (after a device synchronize).

After the rank step, ``gather`` (``pipeline/gather.py``) is the encoder-output gather: real
tensors over the NCCL device group when every rank has its own GPU, metadata only otherwise.
"""

from kimi_bench.pipeline.arms import PROPOSED, Arm, arm, arms, register_arm, with_role
from kimi_bench.pipeline.arms.zero_copy import (
    held_slots,
    produce_zero_copy,
    release_slots,
    stage_into_arena,
)
from kimi_bench.pipeline.carriers import Carrier, carrier, register_carrier
from kimi_bench.pipeline.in_process import (
    OwnerOutput,
    deferred_item,
    eager_item,
    run_arm,
    run_deferred,
    run_eager,
    run_in_process,
)
from kimi_bench.pipeline.recipe import (
    Gloo,
    InTurn,
    Produced,
    RankResult,
    decide,
    make_step,
    producer_step,
    recipe_record,
    scheduler_step,
)
from kimi_bench.pipeline.step import (
    CPU_STAND_IN,
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
    decode_input,
    deserialize,
    feature_bytes,
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
    wrap_shm,
)

__all__ = [
    "CPU_STAND_IN", "PROPOSED", "STAGES", "Arm", "Carrier", "ClockHook", "Gloo", "Hook",
    "InTurn", "NoHook", "OwnerOutput", "Produced", "RankOutput", "RankResult", "Step",
    "arena_to_device", "arm", "arms", "broadcast", "carrier", "decide", "decode_input",
    "deferred_item",
    "deserialize", "eager_item", "feature_bytes", "gather", "held_slots", "make_step",
    "owner_decode", "produce", "produce_zero_copy", "producer_step", "rank_step",
    "recipe_record", "record_ipc", "register_arm", "register_carrier", "release_slots", "run_arm",
    "run_deferred", "run_eager", "run_in_process", "scheduler_step", "serialize", "stage",
    "stage_into_arena", "take", "to_device", "to_host", "with_role", "wrap_shm",
]  # fmt: skip
