"""Option values given as text: image specs, sizes, request rates, endpoints, lists and
``KEY=VALUE`` pairs. Each parser raises ValueError saying what it expected (a usage error)."""

from __future__ import annotations

import math
import re
from typing import Any, Literal

from kimi_bench.options.base import MAX_RATE, RESOLUTION_PRESETS

IMAGE_SPEC_RE = re.compile(r"^\s*(\d+)x(\d+)x(\d+)\s*$")
_AXB = re.compile(r"^\s*(\d+)x(\d+)\s*$")
_SPELLED = re.compile(r"^\s*width\s*=\s*(\d+)\s*,\s*height\s*=\s*(\d+)\s*$")


def parse_image_spec(text: str) -> tuple[tuple[int, int, int], ...]:
    """``"2x1536x1024,1x4096x3072"`` -> ((2, 1536, 1024), (1, 4096, 3072)); width first."""
    groups = []
    for part in str(text).split(","):
        m = IMAGE_SPEC_RE.match(part)
        if not m:
            raise ValueError(
                f"bad image spec {part.strip()!r}: expected COUNTxWIDTHxHEIGHT, "
                "e.g. 4x1536x1024 (comma-separate several)"
            )
        count, w, h = (int(g) for g in m.groups())
        if min(count, w, h) < 1 or count > 256 or max(w, h) > 65_535:
            raise ValueError(
                f"bad image spec {part.strip()!r}: COUNTxWIDTHxHEIGHT with a count of 1..256 "
                "and sides of 1..65535 pixels"
            )
        groups.append((count, w, h))
    return tuple(groups)


def parse_resolution(text: str, order: Literal["wxh", "hxw"] = "wxh") -> tuple[int, int]:
    """-> (width, height). kimi-bench writes and reads sizes WIDTHxHEIGHT (PIL's order,
    ``1920x1080``). Accepted: a preset (``720p``/``1080p``/``1440p``/``4k``), a bare
    ``WIDTHxHEIGHT``, ``width=W,height=H`` spelled out, or sglang.bench_serving's
    HEIGHTxWIDTH order only with an explicit prefix: ``hxw:1024x1536`` (``wxh:`` is
    accepted too). ``order="hxw"`` reads a bare AxB as HEIGHTxWIDTH: only for configs
    written before the convention was unified (:func:`migrate_image_resolution`).
    Anything else is refused rather than guessed."""
    t = str(text).strip().lower()
    if t in RESOLUTION_PRESETS:
        return RESOLUTION_PRESETS[t]
    prefix, sep, rest = t.partition(":")
    if sep and prefix.strip() in ("hxw", "wxh"):
        order = "hxw" if prefix.strip() == "hxw" else "wxh"
        t = rest
    if m := _SPELLED.match(t):
        w, h = int(m.group(1)), int(m.group(2))
    elif m := _AXB.match(t):
        a, b = int(m.group(1)), int(m.group(2))
        w, h = (b, a) if order == "hxw" else (a, b)
    else:
        raise ValueError(
            f"bad image resolution {text!r}: use WIDTHxHEIGHT (e.g. 1536x1024), a preset "
            "(720p, 1080p, 1440p, 4k), width=W,height=H, or hxw:HEIGHTxWIDTH for "
            "sglang.bench_serving's order (e.g. hxw:1024x1536)"
        )
    if not (1 <= w <= 65_535 and 1 <= h <= 65_535):
        raise ValueError(f"bad image resolution {text!r}: sides must be 1..65535 pixels")
    return w, h


def portrait_hint(text: str | None) -> str | None:
    """A warning for a bare ``AxB`` size that is portrait (A < B), such as ``1024x1536``:
    sglang.bench_serving's users type HEIGHTxWIDTH by habit, and kimi-bench reads it as
    1024 wide and 1536 high. None for a landscape or square size, a preset, or a size
    whose order is spelled out (``hxw:``, ``wxh:``, ``width=W,height=H``)."""
    t = str(text or "").strip().lower()
    m = _AXB.match(t)
    if not m or t in RESOLUTION_PRESETS:
        return None
    w, h = int(m.group(1)), int(m.group(2))
    if w >= h:
        return None
    return (
        f"--image-resolution {text} is {w} wide and {h} high (portrait): sizes are "
        f"WIDTHxHEIGHT here. For landscape {h} wide and {w} high give {h}x{w} (or "
        f"hxw:{w}x{h}, sglang.bench_serving's HEIGHTxWIDTH order); wxh:{text} says portrait "
        "is meant and silences this"
    )


def migrate_image_resolution(text: str, resolution: Any) -> str | None:
    """A saved config's ``image_resolution`` in today's convention, or None if it does
    not describe ``resolution`` (width, height).

    Reports written before the size convention was unified hold ``image_resolution`` in
    sglang.bench_serving's HEIGHTxWIDTH order (``"240x320"``) next to ``resolution``
    ``[320, 240]``. Such a pair is recognised by the two agreeing only in the old order,
    and the text is rewritten as ``hxw:240x320`` (the same size, said explicitly)."""
    try:
        size = tuple(int(v) for v in resolution)
        if parse_resolution(text) == size:
            return text
        if parse_resolution(text, "hxw") == size:
            return text if text.strip().lower().startswith("hxw:") else f"hxw:{text.strip()}"
    except (TypeError, ValueError):
        return None
    return None


def parse_rates(value: Any) -> tuple[float, ...]:
    """``"2,8,inf"`` or ``[2, 8, "inf"]`` -> (2.0, 8.0, inf); finite rates in (0, 1e6]."""
    parts = value.split(",") if isinstance(value, str) else list(value)
    rates = []
    for part in parts:
        p = str(part).strip().lower()
        try:
            r = math.inf if p in ("inf", "infinity") else float(p)
        except ValueError:
            raise ValueError(f"bad rate {part!r}: a number of requests/s or inf") from None
        if math.isinf(r) and p not in ("inf", "infinity"):  # 1e400 overflows to inf
            raise ValueError(
                f"bad rate {part!r}: too large for a number; write inf for no rate limit"
            )
        if not (r == math.inf or 0.001 <= r <= MAX_RATE):
            raise ValueError(f"bad rate {part!r}: between 0.001 and {MAX_RATE:g} req/s, or inf")
        rates.append(r)
    if not rates:
        raise ValueError("at least one request rate is needed")
    return tuple(rates)


def rate_label(rate: float) -> str:
    return "inf" if math.isinf(rate) else f"{rate:g}"


def distinct_arms(arms: tuple[str, ...]) -> tuple[str, ...]:
    """Arms given and each once (``eager,eager`` would compare a run with itself)."""
    if not arms or len(set(arms)) != len(arms):
        raise ValueError(f"arm names must be given and distinct, got {', '.join(arms)}")
    return arms


def _split_list(value: Any) -> Any:
    return [v.strip() for v in value.split(",") if v.strip()] if isinstance(value, str) else value


def _metadata(value: Any) -> Any:
    if isinstance(value, (list, tuple)):
        out = {}
        for item in value:
            key, sep, val = str(item).partition("=")
            if not sep or not key.strip():
                raise ValueError(f"bad metadata {item!r}: expected KEY=VALUE")
            out[key.strip()] = val
        return out
    return value


def parse_endpoint(text: str) -> tuple[str, str]:
    """``NAME=URL`` (``--endpoint``) -> (name, base URL without a trailing slash); the URL
    is http(s) with a host. A trailing ``/v1`` (the OpenAI "base URL" many tools print) is
    dropped: the client adds ``/v1/chat/completions`` itself. ValueError says what is wrong
    (a usage error)."""
    name, sep, url = text.partition("=")
    name, url = name.strip(), url.strip().rstrip("/")
    url = url.removesuffix("/v1")
    if not sep or not name or not url:
        raise ValueError(f"--endpoint takes NAME=URL, got {text!r}")
    import httpx  # here: 40 ms of import that every command but serve-ab --endpoint skips

    try:
        parsed = httpx.URL(url)
    except httpx.InvalidURL as exc:
        raise ValueError(f"--endpoint {name}: bad URL {url!r}: {exc}") from None
    if parsed.scheme not in ("http", "https") or not parsed.host:
        raise ValueError(f"--endpoint {name}: the URL must be http(s)://HOST[:PORT], got {url!r}")
    if "/v1/" in parsed.path + "/":
        raise ValueError(
            f"--endpoint {name}: give the server's base URL (http://HOST:PORT or "
            f"http://HOST:PORT/v1), not a path under /v1, got {url!r}"
        )
    return name, url


GOODPUT_KEYS = ("ttft", "tpot", "e2el")  # vllm bench serve's and sglang.bench_serving's names


def parse_goodput(value: Any) -> dict[str, float]:
    """``["ttft:500", "tpot:50"]`` (or one string ``"ttft:500 tpot:50"``, as vllm and
    sglang take ``--goodput``) -> {"ttft": 500.0, "tpot": 50.0}: SLOs in ms, each > 0,
    each key once."""
    parts = value.split() if isinstance(value, str) else [p for v in value for p in str(v).split()]
    out: dict[str, float] = {}
    for part in parts:
        key, sep, text = part.partition(":")
        key = key.strip().lower()
        if not sep or key not in GOODPUT_KEYS:
            raise ValueError(
                f"bad SLO {part!r}: expected KEY:MS with KEY one of {', '.join(GOODPUT_KEYS)} "
                "(e.g. ttft:500 tpot:50 e2el:2000)"
            )
        if key in out:
            raise ValueError(f"SLO {key} is given twice")
        try:
            ms = float(text)
        except ValueError:
            raise ValueError(f"bad SLO {part!r}: {text!r} is not a number of ms") from None
        if not math.isfinite(ms) or ms <= 0:
            raise ValueError(f"bad SLO {part!r}: the limit must be a finite number of ms > 0")
        out[key] = ms
    return out


def parse_percentiles(value: Any) -> tuple[float, ...]:
    """``"50,90,99,99.9"`` -> (50.0, 90.0, 99.0, 99.9): each in (0, 100], sorted, distinct."""
    parts = str(value).split(",") if isinstance(value, str) else list(value)
    try:
        qs = sorted({float(str(p).strip()) for p in parts if str(p).strip()})
    except ValueError:
        raise ValueError(f"comma-separated percentiles expected, got {value!r}") from None
    if not qs or any(not 0 < q <= 100 for q in qs):
        raise ValueError(f"percentiles must be in (0, 100], got {value!r}")
    return tuple(qs)
