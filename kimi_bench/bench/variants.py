"""What a run's report says about the objects it ran with (config and data), so that the
readers of reports (gate, compare, project, figures) ask the report, not the arms' or
carriers' names: which arm is the baseline and which the change, what the carrier does,
which decoder the runtime's rule chose and which decoder each input actually got."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any, TypedDict

import torch

from kimi_bench.domain.decoders import DecoderSummary, choose
from kimi_bench.domain.runtime import get_profile
from kimi_bench.pipeline import carrier, with_role

if TYPE_CHECKING:
    from kimi_bench.bench.serve_runs import ServeRun


class CarrierTraits(TypedDict):
    """What a carrier declares (``config.carrier_traits``)."""

    name: str
    uses_segments: bool
    spans_nodes: bool
    serialize_op: str
    runtime: bool


class DecoderConfig(DecoderSummary):
    """``config.decoding``: ``--decoder`` as asked, and what the runtime's rule chose."""

    requested: str


def arm_roles(arms: Sequence[str]) -> dict[str, str | None]:
    """The baseline every other arm is compared with and the change the gate follows."""
    return {"baseline": with_role(arms, "baseline"), "change": with_role(arms, "change")}


def carrier_traits(name: str) -> CarrierTraits:
    """What a carrier declares (``project`` models a carrier by these, not by its name)."""
    c = carrier(name)
    return {
        "name": c.name,
        "uses_segments": c.uses_segments,
        "spans_nodes": c.spans_nodes,
        "serialize_op": c.serialize_op,
        "runtime": c.runtime,
    }


def variant_config(
    arms: Sequence[str],
    runtime: str,
    carrier_name: str | None = None,
    decoder: str | None = None,
    device: torch.device | None = None,
    roles: dict[str, str | None] | None = None,
) -> dict[str, Any]:
    """What a report's ``config`` says of the runtime profile and the arms' roles and, for
    a run of the emulator (``carrier_name`` and ``decoder`` given), of its carrier and
    decoder: the one the runtime's rule picks on ``device`` for ``--decoder``, why, and
    its library's version (a real server's are its own). ``roles``: the roles when
    ``arms`` are not arms (the endpoints of real servers)."""
    roles = roles or arm_roles(arms)
    traits = None if carrier_name is None else carrier_traits(carrier_name)
    profile = get_profile(runtime)
    out: dict[str, Any] = {"runtime_profile": profile.summary(), "arm_roles": roles}
    if traits is not None:
        out["carrier_traits"] = traits
    if decoder is not None and device is not None:
        decoding: DecoderConfig = {
            "requested": decoder,
            **choose(decoder, profile, device).summary(),
        }
        out["decoding"] = decoding
    return out


def decode_counts(decodes: Iterable[Sequence[str]]) -> dict[str, int]:
    """``"decoder: why" -> inputs`` over (decoder, why) pairs (``Step.decodes``)."""
    return dict(Counter(f"{name}: {why}" for name, why in decodes))


def recipes(runs: Sequence[ServeRun]) -> dict[str, dict[str, list[str]]]:
    """Each arm's recipe trail (``data.recipe``), from the first request record that
    carries it (the pipeline reports it with every request; the same each time; request
    rows leave it out)."""
    out: dict[str, dict[str, list[str]]] = {}  # arm -> pipeline.recipe_record
    for run in runs:
        trail = next((r.recipe for r in run.records if r.recipe), None)
        if trail and run.arm not in out:
            out[run.arm] = dict(trail)
    return out


def run_decodes(runs: Sequence[ServeRun]) -> dict[str, dict[str, int]]:
    """Per arm, which decoder each measured request's images got and why (every rate
    and repeat of the arm)."""
    pairs: dict[str, list[tuple[str, str]]] = {}
    for r in runs:
        pairs.setdefault(r.arm, []).extend(d for rec in r.records for d in rec.decodes)
    return {a: decode_counts(p) for a, p in pairs.items()}
