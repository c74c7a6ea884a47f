"""Measured host-copy scaling for the projection's ``threaded`` stages.

micro gives every process ``cores // (ranks + 1)`` torch threads, so a torch host copy gets
slower as ranks are added, by an amount a 2-rank report cannot show. The host probe
(``reports/projection/host-probe/copy_probe.py``) measures each copy op micro's stages run,
at micro's thread split for 2, 4 and 8 ranks on one host: ``alone`` (one process: the
producer copies while the ranks wait) and ``together`` (``ranks`` processes at once: the
ranks' own copies, where the slowest ends the stage). A stage's change between two rank
counts is the probe's change for the bytes each of its ops moves (linear in bytes from the
nearest measured size); what else the stage does keeps its calibration cost.

The committed probe of an H200 host (16 cores) ships with the package and is used when the
calibration host has the same core count; elsewhere the model falls back to
``thread_exponent``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

from pydantic import BaseModel, ValidationError

from kimi_bench.infra.jsonio import parse_json
from kimi_bench.infra.limits import MAX_CONFIG_BYTES, read_text_bounded

# the ranks' own copies run in every rank process at once; the rest runs in the producer
RANK_SIDE_STAGES = frozenset({"take_copy"})


@dataclass(frozen=True)
class CopyProbe:
    source: str
    cores: int
    # op -> bytes -> side ("alone" | "together") -> ranks per node -> ms
    ops: dict[str, dict[int, dict[str, dict[int, float]]]]

    def covers(self, cores: int | None, *ranks: int) -> bool:
        """Measured on a host with ``cores`` cores, for every op, size and side at each of
        ``ranks`` (else the model falls back to the exponent, never to a partial probe)."""
        return cores == self.cores and all(
            r in by_rank
            for by in self.ops.values()
            for sides in by.values()
            for by_rank in sides.values()
            for r in ranks
        )

    def ms(self, op: str, nbytes: int, side: str, ranks: int) -> float | None:
        """Milliseconds of ``op`` on ``nbytes`` at ``ranks`` per node, or None."""
        sizes = self.ops.get(op)
        if not sizes or nbytes <= 0:
            return None
        size = min(sizes, key=lambda s: abs(s - nbytes))
        at = sizes[size][side].get(ranks)
        return None if at is None else at * nbytes / size

    def change_ms(self, stage: str, ops: dict[str, tuple[int, int]], r0: int, r1: int) -> float:
        """How much longer (ms) the copies of one stage take at ``r1`` ranks per node than
        at ``r0``; bytes of a rank-side stage are per rank (the ledger sums every rank)."""
        side = "together" if stage in RANK_SIDE_STAGES else "alone"
        change = 0.0
        for op, (nbytes, _) in ops.items():
            per = nbytes // r0 if side == "together" else nbytes
            a, b = self.ms(op, per, side, r0), self.ms(op, per, side, r1)
            if a is not None and b is not None:
                change += b - a
        return change


class _ProbeFile(BaseModel):
    """The probe's JSON (see copy_probe.py): ``cores`` and ``ops`` as ``CopyProbe.ops``."""

    cores: int
    ops: dict[str, dict[int, dict[str, dict[int, float]]]]


def parse_probe(raw: object, source: str) -> CopyProbe:
    """The probe's JSON, validated; ValueError names what is wrong."""
    try:
        probe = _ProbeFile.model_validate(raw)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(x) for x in first["loc"]) or "(top level)"
        raise ValueError(f"{source}: not a host-copy probe ({where}: {first['msg']})") from None
    if any(set(s) != {"alone", "together"} for by in probe.ops.values() for s in by.values()):
        why = "every size needs 'alone' and 'together'"
        raise ValueError(f"{source}: not a host-copy probe ({why})")
    return CopyProbe(source, probe.cores, probe.ops)


def load_probe(path: Path | None) -> CopyProbe:
    """A probe file, or the packaged H200 probe when ``path`` is None."""
    if path is None:
        text = resources.files("kimi_bench.project").joinpath("h200_copy_probe.json")
        return parse_probe(json.loads(text.read_text()), "packaged H200 probe (16 cores)")
    try:
        raw = parse_json(read_text_bounded(path, MAX_CONFIG_BYTES, "host probe"), str(path))
    except (OSError, ValueError) as exc:  # missing, special, too large, not JSON, too deep
        raise ValueError(f"cannot read the host probe {path}: {exc}") from None
    return parse_probe(raw, str(path))
