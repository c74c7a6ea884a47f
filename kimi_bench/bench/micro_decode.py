"""``micro``'s account of the arm whose inputs travel encoded (``deferred-decode``, proposed,
not in the runtime; the arm object says so, ``encoded_inputs``): the bytes and
milliseconds it saves against every other arm but the baseline (``deferred``,
``zero-copy``), and the time the owner's decode adds to the critical path.

With the arm in a run every arm receives encoded images (``engine.micro_job.
job_inputs``): the other arms decode at the producer (inside ``producer``), this one
decodes on each owner (inside ``owner_h2d``; its share is recorded per repeat as
``owner_decode_ms``, the slowest rank's). Savings are paired per repeat (base minus arm:
positive = the arm is cheaper) with their intervals, derived in ``results.micro_decode``.
"""

from __future__ import annotations

from kimi_bench.bench.micro_records import DecodeBlock, Repeat, Samples
from kimi_bench.infra.stats import Measurement
from kimi_bench.infra.stats.format import fmt_ms
from kimi_bench.pipeline import arm as arm_of
from kimi_bench.results.micro_decode import decode_savings, owner_decode

# the stages that carry the payload from the producer to the ranks
CARRIER_STAGES = ("serialize", "to_rank0", "broadcast", "take_copy")


def _carried(rec: Repeat) -> int:
    return sum(rec["stage_bytes"].get(s, 0) for s in CARRIER_STAGES)


def decode_block(samples: Samples, totals: dict[str, Measurement]) -> DecodeBlock | None:
    """Savings of the arm against each base present, and its owner decode time
    (``totals``: each arm's total per repeat, ``micro_report.total_measurement``)."""
    name = next((n for n in samples if arm_of(n).encoded_inputs and arm_of(n).proposed), None)
    arm = samples.get(name or "") or []
    if name is None or not arm:
        return None
    decisions = arm[0].get("decisions") or []
    carried = _carried(arm[0])
    moved = sum(r["bytes"] for r in arm[0]["copies"] if r["copies"])
    versus = {}
    for other, base in samples.items():
        if other == name or arm_of(other).role == "baseline" or not base:
            continue
        versus[other] = {
            **decode_savings(base, arm, totals[other], totals[name]),
            "carried_bytes_saved": _carried(base[0]) - carried,
            "moved_bytes_saved": sum(r["bytes"] for r in base[0]["copies"] if r["copies"]) - moved,
        }
    routed = {d["reason"] for d in decisions if d.get("defer") and not d.get("encoded")}
    return DecodeBlock(
        arm=name,
        label=arm_of(name).label,
        encoded_images=sum(1 for d in decisions if d.get("encoded")),
        images=len(decisions),
        routed=sorted(routed),
        carried_bytes=carried,
        moved_bytes=moved,
        owner_decode_ms=owner_decode(arm),
        versus=versus,
    )


def decode_notes(block: DecodeBlock | None) -> list[str]:
    """Plain sentences: what travelled, what it saved, what it put on the critical path."""
    if block is None:
        return []
    notes = [
        f"{block['arm']} is {block['label']}: {block['encoded_images']} of "
        f"{block['images']} images travelled encoded ({block['carried_bytes']:,} B through "
        "the carrier stages) and were decoded once, on their owner; every other arm got the "
        "same encoded images and decoded them at its producer (inside producer)."
    ]
    if block["routed"]:
        notes.append(f"{block['arm']} routed to raw uint8: " + "; ".join(block["routed"]))
    dec = block["owner_decode_ms"].get("median")
    for name, v in block["versus"].items():
        saved = v["saved_ms"].get("median")
        notes.append(
            f"{block['arm']} vs {name}: total {fmt_ms(saved)} saved per repeat (median, "
            f"paired; negative = slower); through the carriers {block['carried_bytes']:,} B "
            f"vs {block['carried_bytes'] + v['carried_bytes_saved']:,} B, copied in all "
            f"{block['moved_bytes']:,} B vs {block['moved_bytes'] + v['moved_bytes_saved']:,} B; "
            "the producer is "
            f"{fmt_ms(v['producer_saved_ms'].get('median'))} shorter and owner_h2d "
            f"{fmt_ms(v['owner_added_ms'].get('median'))} longer: the owner's decode "
            f"({fmt_ms(dec)}, slowest rank) is now on the critical path after the broadcast."
        )
    return notes


def decode_part(
    samples: Samples, totals: dict[str, Measurement]
) -> tuple[DecodeBlock | None, list[str]]:
    """The proposed deferred-decode arm's block (None when it did not run) and its notes."""
    block = decode_block(samples, totals)
    return block, decode_notes(block)
