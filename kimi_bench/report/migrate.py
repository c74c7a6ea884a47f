"""Older ``report.json`` layouts to the current one, applied once when a report is read
(``Report.from_dict``), so that readers (figures, HTML, gate, project) know one layout.

Each step only fills a field the current writers always write from where an older writer
kept it, and never overwrites one that is there: a report in the current layout comes out
unchanged (a test checks this for every committed report), so it gates and renders
exactly as written.

What older layouts differ in:

- a micro stage block kept its summary under ``measurement`` or ``summary`` (now
  ``summary_ms``) and its samples under ``samples`` (now ``samples_ms``);
- a micro report kept the floor only in the ``floor`` block (now also ``floor_ms`` at the
  top level, which the gate and the figures read);
- ``config.carrier`` named the carrier (now ``config.transport``);
- the preset was only in ``config.preprocess.name`` or ``config.preset`` (now
  ``environment.preset``);
- a serve-ab report lacked ``summary.rates`` (labels in run order) or ``config.arms``.

Earlier serve-ab ``ab`` blocks (``ab[rate][metric].delta``, one arm, a fraction) stay as
written: the gate recomputes every comparison from the request rows and checks only the
current ``delta_pct`` against them, and the tables (``report.tables_serve.ab_entries``)
show those blocks converted to percent, without JSON pointers.
"""

from __future__ import annotations

import math
from typing import Any

Dict = dict[str, Any]


def rate_label(rate: Any) -> str:
    """The label of an offered rate ("2", "8", "inf"; null and infinity are "inf")."""
    if rate is None or (isinstance(rate, float) and math.isinf(rate)):
        return "inf"
    if isinstance(rate, float) and rate.is_integer():
        return str(int(rate))
    return str(rate)


def _block(raw: Dict, key: str) -> Dict:
    value = raw.get(key)
    return value if isinstance(value, dict) else {}


def _stage(block: Any) -> Any:
    if not isinstance(block, dict):
        return block
    out = dict(block)
    if "summary_ms" not in out:
        for old in ("measurement", "summary"):
            if isinstance(out.get(old), dict):
                out["summary_ms"] = out[old]
                break
    if "samples_ms" not in out and isinstance(out.get("samples"), list):
        out["samples_ms"] = out["samples"]
    return out


def _micro(raw: Dict) -> None:
    arms = raw.get("arms")
    if isinstance(arms, dict):
        raw["arms"] = {
            arm: (
                block | {"stages": {s: _stage(b) for s, b in block["stages"].items()}}
                if isinstance(block, dict) and isinstance(block.get("stages"), dict)
                else block
            )
            for arm, block in arms.items()
        }
    floor = _block(raw, "floor").get("floor_ms")
    if raw.get("floor_ms") is None and floor is not None:
        raw["floor_ms"] = floor


def _serve(raw: Dict) -> None:
    summary, config = _block(raw, "summary"), _block(raw, "config")
    rows = [r for r in raw.get("results") or [] if isinstance(r, dict)]
    rates = config.get("rates") or list(dict.fromkeys(r.get("rate") for r in rows))
    if not summary.get("rates") and rates:
        raw["summary"] = summary | {"rates": [rate_label(r) for r in rates]}
    if not config.get("arms") and rows:
        raw["config"] = config | {"arms": list(dict.fromkeys(str(r.get("arm")) for r in rows))}


def _envelope(raw: Dict) -> None:
    config, env = _block(raw, "config"), _block(raw, "environment")
    if "transport" not in config and config.get("carrier"):
        config = raw["config"] = config | {"transport": config["carrier"]}
    if not env.get("preset"):
        pre = config.get("preprocess")
        preset = (pre.get("name") if isinstance(pre, dict) else None) or config.get("preset")
        if preset:
            raw["environment"] = env | {"preset": preset}


def migrate(raw: Dict) -> Dict:
    """``raw`` in the current layout: a new dict (``raw`` is not changed); the same content
    when it already is current."""
    out = dict(raw)
    _envelope(out)
    if out.get("kind") == "micro":
        _micro(out)
    elif out.get("kind") == "serve-ab":
        _serve(out)
    return out
