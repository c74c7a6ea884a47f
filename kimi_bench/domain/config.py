"""Preprocessing configuration: presets and checkpoint ``preprocessor_config.json`` loading.

See SPEC section 2. Everything here is immutable data; nothing touches tensors.
"""

from __future__ import annotations

import difflib
import math
import warnings
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from kimi_bench.infra.jsonio import InputError, parse_json
from kimi_bench.infra.limits import MAX_CONFIG_BYTES, read_text_or

BACKGROUND_PATTERNS = ("chessboard", "white", "black", "gray")

# The runtime's key names for ``transparent_bg_config`` and the fallbacks it applies when a
# chessboard config omits a key (SPEC section 2).
_BG_FALLBACK: dict[str, Any] = {
    "pattern": "black",
    "chessboard_square_size": 16,
    "chessboard_white_value": 255,
    "chessboard_gray_value": 200,
    "chessboard_square_on_top_left": True,
}
# Names an earlier kimi-bench wrote; accepted with a deprecation warning.
_BG_OLD_NAMES = {
    "square_size": "chessboard_square_size",
    "white_value": "chessboard_white_value",
    "gray_value": "chessboard_gray_value",
    "white_top_left": "chessboard_square_on_top_left",
}


# Sane ranges of the integer fields, checked when a config is built (a checkpoint file or
# a preset). ViT patch sides are 8..32 in practice (Kimi: 14); merge kernels 1..4 (Kimi: 2);
# the K3 patch budget is 65536 and its one-side cap 512 patches. The upper bounds leave
# room for larger models while refusing values that only overflow later, per image.
INT_RANGES: dict[str, tuple[int, int]] = {
    "patch_size": (1, 256),
    "merge_kernel_size": (1, 16),
    "in_patch_limit": (1, 1 << 20),
    "patch_limit_on_one_side": (1, 1 << 14),
    "fixed_output_tokens": (1, 1 << 20),
}


# The features are computed in float32 and cast to bfloat16: a value these cannot hold
# turns into 0 or inf in the arithmetic, never an error (SPEC section 5).
FLOAT32_TINY = 2.0**-126  # the smallest normal float32
BF16_MAX = (2.0 - 2.0**-7) * 2.0**127  # the largest finite bfloat16 (float32's is larger)

# The keys a checkpoint's preprocessor config may set here; an unknown key this close to
# one of them is a misspelling, refused with the name it resembles.
CONFIG_KEYS = (
    *INT_RANGES,
    "image_mean",
    "image_std",
    "transparent_bg_config",
    "transparent_bg_fill_stage",
)
TYPO_CUTOFF = 0.85


class ConfigError(ValueError):
    """A preset name or a preprocessor_config.json that cannot be used."""


def check_float32_range(mean: tuple[float, ...], std: tuple[float, ...]) -> None:
    """Refuse normalization values the float32 arithmetic cannot carry: an ``image_std``
    that is not a normal float32 (1e-46 is 0 there, 1e-39 subnormal) and a mean or std
    whose features ``x / (255 * std) - mean / std`` (x in 0..255) leave the bfloat16 range."""
    for m, sd in zip(mean, std, strict=True):
        if abs(sd) < FLOAT32_TINY:
            kind = "0" if abs(sd) < 2.0**-149 / 2 else "subnormal"
            raise ConfigError(
                f"image_std {sd!r} is {kind} in float32, where the features are computed; "
                f"use a value of at least {FLOAT32_TINY:.4g} in magnitude"
            )
        if (1.0 + abs(m)) / abs(sd) > BF16_MAX:
            raise ConfigError(
                f"image_mean {m!r} with image_std {sd!r}: the features (up to "
                f"{(1.0 + abs(m)) / abs(sd):.3g}) overflow float32/bfloat16 (max {BF16_MAX:.4g})"
            )


def check_key_spelling(body: Mapping[str, Any], known: tuple[str, ...]) -> None:
    """A key that is not read here but nearly matches one that is (``patch_sise``) is
    refused naming the key it resembles; other keys of a checkpoint's file are ignored."""
    for key in body:
        if key in known or not isinstance(key, str):
            continue
        close = difflib.get_close_matches(key, known, n=1, cutoff=TYPO_CUTOFF)
        if close:
            raise ConfigError(
                f"unknown key {key!r}: did you mean {close[0]!r}? (kimi-bench reads "
                f"{', '.join(known)})"
            )


def _checked_int(key: str, value: Any) -> int:
    """``value`` as an integer within ``INT_RANGES[key]``: integral JSON numbers (14 or
    14.0) pass; 14.9, 1e999, "14" and true are refused with a message naming ``key``."""
    if isinstance(value, float) and math.isfinite(value) and value.is_integer():
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int):
        raise ConfigError(f"{key} must be an integer, got {value!r}")
    lo, hi = INT_RANGES[key]
    if not lo <= value <= hi:
        raise ConfigError(f"{key} must be within {lo}..{hi}, got {value}")
    return value


@dataclass(frozen=True)
class BackgroundConfig:
    """How transparent pixels are filled (K3: a chessboard composited after the resize).

    Field names are the runtime's ``transparent_bg_config`` keys; ``as_dict`` writes them
    unchanged into the deferred record. ``chessboard_square_on_top_left`` puts a white
    square at (0, 0)."""

    pattern: str = "chessboard"
    chessboard_square_size: int = 8
    chessboard_white_value: int = 255
    chessboard_gray_value: int = 180
    chessboard_square_on_top_left: bool = True

    def __post_init__(self) -> None:
        if self.pattern not in BACKGROUND_PATTERNS:
            raise ConfigError(
                f"unknown background pattern {self.pattern!r}; "
                f"expected one of {', '.join(BACKGROUND_PATTERNS)}"
            )
        if self.chessboard_square_size < 1:
            raise ConfigError(
                f"chessboard_square_size must be >= 1, got {self.chessboard_square_size}"
            )
        for key in ("chessboard_white_value", "chessboard_gray_value"):
            if not 0 <= getattr(self, key) <= 255:
                raise ConfigError(f"{key} must be within 0..255, got {getattr(self, key)}")

    @classmethod
    def from_mapping(cls, raw: Mapping[str, Any]) -> BackgroundConfig:
        """Read a ``transparent_bg_config`` object with the runtime's keys (the older
        kimi-bench names are accepted with a DeprecationWarning). Missing keys take the
        runtime's fallbacks; an unknown key is an error that names it."""
        values: dict[str, Any] = {}
        for key, value in raw.items():
            if key in _BG_OLD_NAMES:
                warnings.warn(
                    f"transparent_bg_config key {key!r} is deprecated; the runtime's name is "
                    f"{_BG_OLD_NAMES[key]!r}",
                    DeprecationWarning,
                    stacklevel=2,
                )
                key = _BG_OLD_NAMES[key]
            elif key not in _BG_FALLBACK and key != "fill_stage":
                raise ConfigError(
                    f"unknown transparent_bg_config key {key!r}; expected {', '.join(_BG_FALLBACK)}"
                )
            values[key] = value
        merged = {k: values.get(k, v) for k, v in _BG_FALLBACK.items()}
        for key in ("chessboard_square_size", "chessboard_white_value", "chessboard_gray_value"):
            v = merged[key]
            if isinstance(v, bool) or not isinstance(v, int):
                raise ConfigError(f"transparent_bg_config.{key} must be an integer, got {v!r}")
        if not isinstance(merged["chessboard_square_on_top_left"], bool):
            raise ConfigError(
                "transparent_bg_config.chessboard_square_on_top_left must be true or false"
            )
        return cls(**{k: merged[k] for k in _BG_FALLBACK} | {"pattern": str(merged["pattern"])})

    def as_dict(self) -> dict[str, Any]:
        return {k: getattr(self, k) for k in _BG_FALLBACK}


@dataclass(frozen=True)
class PreprocessConfig:
    """The numbers the resize plan and the materializer need (SPEC section 2)."""

    name: str
    patch_size: int = 14
    merge_kernel_size: int = 2
    in_patch_limit: int = 16384
    patch_limit_on_one_side: int = 512
    fixed_output_tokens: int | None = None
    image_mean: tuple[float, float, float] = (0.5, 0.5, 0.5)
    image_std: tuple[float, float, float] = (0.5, 0.5, 0.5)
    transparent_bg: BackgroundConfig | None = None
    bg_fill_stage: str = "after_resize"
    extra: dict[str, Any] = field(default_factory=dict, compare=False, hash=False)

    def __post_init__(self) -> None:
        for key in INT_RANGES:
            value = getattr(self, key)
            if value is not None or key != "fixed_output_tokens":
                _checked_int(key, value)
        if len(self.image_mean) != 3 or len(self.image_std) != 3:
            raise ConfigError("image_mean and image_std need three values (R, G, B)")
        if not all(math.isfinite(v) for v in (*self.image_mean, *self.image_std)):
            raise ConfigError("image_mean and image_std must be finite numbers")
        if any(s == 0 for s in self.image_std):
            raise ConfigError("image_std may not contain 0")
        check_float32_range(self.image_mean, self.image_std)
        if self.bg_fill_stage != "after_resize":
            raise ConfigError(
                f"transparent_bg_fill_stage {self.bg_fill_stage!r} is not supported "
                "(the runtime composites after the resize)"
            )

    def summary(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "patch_size": self.patch_size,
            "merge_kernel_size": self.merge_kernel_size,
            "in_patch_limit": self.in_patch_limit,
            "patch_limit_on_one_side": self.patch_limit_on_one_side,
            "fixed_output_tokens": self.fixed_output_tokens,
            "image_mean": list(self.image_mean),
            "image_std": list(self.image_std),
            "transparent_bg_config": self.transparent_bg.as_dict() if self.transparent_bg else None,
        }


PRESETS: dict[str, PreprocessConfig] = {
    "kimi-k2.5": PreprocessConfig(name="kimi-k2.5", in_patch_limit=16384),
    "kimi-k3": PreprocessConfig(
        name="kimi-k3", in_patch_limit=65536, transparent_bg=BackgroundConfig()
    ),
}


def get_preset(name: str) -> PreprocessConfig:
    try:
        return PRESETS[name]
    except KeyError:
        raise ConfigError(
            f"unknown preset {name!r}; available: {', '.join(sorted(PRESETS))}"
        ) from None


def _is_number(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def _triple(value: Any, key: str) -> tuple[float, float, float]:
    if _is_number(value):
        return (float(value),) * 3
    if isinstance(value, (list, tuple)) and len(value) == 3 and all(map(_is_number, value)):
        return (float(value[0]), float(value[1]), float(value[2]))
    raise ConfigError(f"{key} must be a finite number or a list of three, got {value!r}")


def config_from_mapping(raw: dict[str, Any], name: str = "custom") -> PreprocessConfig:
    """Build a config from a checkpoint's preprocessor config (keys under
    ``media_proc_cfg`` or at the top level). Missing keys take the K2.5 defaults; every
    value is checked by type and range (``INT_RANGES``) here, at load, not per image."""
    body = raw.get("media_proc_cfg", raw)
    if not isinstance(body, dict):
        raise ConfigError("media_proc_cfg must be a JSON object")
    if body is raw:
        check_key_spelling(raw, (*CONFIG_KEYS, "media_proc_cfg"))
    else:
        check_key_spelling(raw, ("media_proc_cfg",))
        check_key_spelling(body, CONFIG_KEYS)
    base = PreprocessConfig(name=name)
    bg_raw = body.get("transparent_bg_config")
    if bg_raw is not None and not isinstance(bg_raw, dict):
        raise ConfigError(f"transparent_bg_config must be a JSON object, got {bg_raw!r}")
    bg = BackgroundConfig.from_mapping(bg_raw) if bg_raw is not None else None

    def integer(key: str) -> int:
        return _checked_int(key, body.get(key, getattr(base, key)))

    fixed = body.get("fixed_output_tokens")
    stage = body.get("transparent_bg_fill_stage", "after_resize")
    if not isinstance(stage, str):
        raise ConfigError(f"transparent_bg_fill_stage must be a string, got {stage!r}")
    return replace(
        base,
        patch_size=integer("patch_size"),
        merge_kernel_size=integer("merge_kernel_size"),
        in_patch_limit=integer("in_patch_limit"),
        patch_limit_on_one_side=integer("patch_limit_on_one_side"),
        fixed_output_tokens=None if fixed is None else _checked_int("fixed_output_tokens", fixed),
        image_mean=_triple(body.get("image_mean", base.image_mean), "image_mean"),
        image_std=_triple(body.get("image_std", base.image_std), "image_std"),
        transparent_bg=bg,
        bg_fill_stage=stage,
    )


def load_preprocessor_config(path: str | Path) -> PreprocessConfig:
    """Read a checkpoint's preprocessor config (a regular file of at most 1 MiB); every
    error names the file and, for a bad value, the key."""
    p = Path(path)
    text = read_text_or(ConfigError, p, MAX_CONFIG_BYTES, "preprocessor config")
    try:
        raw = parse_json(text, f"{p} is not valid JSON", constants=True)
    except InputError as exc:  # not JSON, a 5000-digit number, nested too deeply
        raise ConfigError(str(exc)) from None
    if not isinstance(raw, dict):
        raise ConfigError(f"{p} must hold a JSON object")
    try:
        return config_from_mapping(raw, name=f"file:{p.name}")
    except ConfigError as exc:
        raise ConfigError(f"{p}: {exc}") from None


def resolve_config(preset: str | None, config_path: str | Path | None) -> PreprocessConfig:
    """CLI helper: a checkpoint file wins over a preset name."""
    if config_path is not None:
        return load_preprocessor_config(config_path)
    return get_preset(preset or "kimi-k3")
