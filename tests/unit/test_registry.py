"""The one registry class (``infra.registry.Registry``) behind arms, carriers and
decoders: built once on first use, a re-registration replaces the object, a listed module
is imported only when its name is asked for, and an unknown name's error lists the names
known, in each registry's own words."""

from __future__ import annotations

import importlib
import sys
from pathlib import Path

import pytest

from kimi_bench.domain import decoders
from kimi_bench.infra.registry import Registry

# the modules (kimi_bench.pipeline re-exports functions under the same names)
arms = importlib.import_module("kimi_bench.pipeline.arms")
carriers = importlib.import_module("kimi_bench.pipeline.carriers")


class Made:
    def __init__(self, name: str) -> None:
        self.name = name


def _registry(modules: dict[str, str] | None = None) -> Registry[Made]:
    return Registry(lambda name, known: KeyError(f"no {name!r}; known: {known}"), modules)


def test_an_object_is_built_once_and_rebuilt_after_a_new_registration() -> None:
    reg = _registry()
    built: list[str] = []

    def factory(name: str) -> Made:
        built.append(name)
        return Made(name)

    reg.register("a", factory)
    assert built == []  # nothing is built until asked for
    first = reg.get("a")
    assert reg.get("a") is first and built == ["a"]
    reg.register("a", Made)
    assert reg.get("a") is not first and reg.factory("a") is Made


def test_a_listed_module_is_imported_when_its_name_is_asked_for(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "kb_reg_for_test.py").write_text(
        "from kimi_bench.infra.registry import Registry\n"
        "REG = Registry(lambda name, known: KeyError(name), {'plug': 'kb_plug_for_test'})\n"
    )
    (tmp_path / "kb_plug_for_test.py").write_text(
        "from kb_reg_for_test import REG\nREG.register('plug', lambda name: name.upper())\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    for name in ("kb_reg_for_test", "kb_plug_for_test"):
        monkeypatch.delitem(sys.modules, name, raising=False)
    reg = importlib.import_module("kb_reg_for_test").REG
    assert reg.known() == ["plug"] and reg.factory("plug") is None
    assert "kb_plug_for_test" not in sys.modules  # not imported until asked for
    assert reg.get("plug") == "PLUG"
    assert "kb_plug_for_test" in sys.modules


def test_unknown_names_say_what_is_known_in_each_registrys_words() -> None:
    reg = _registry({"later": "nowhere"})
    reg.register("now", Made)
    with pytest.raises(KeyError, match="no 'x'; known: now, later"):
        reg.get("x")
    with pytest.raises(arms.UnknownArm, match="unknown arm 'x'; expected one of eager, "):
        arms.arm("x")
    with pytest.raises(carriers.UnknownCarrier, match="unknown transport 'x'; known: shm, "):
        carriers.carrier("x")
    with pytest.raises(decoders.UnknownDecoder, match="unknown decoder 'x'; known: pil, "):
        decoders.decoder("x")


def test_arms_carriers_and_decoders_are_registries_of_built_once_objects() -> None:
    assert arms.arm("deferred") is arms.ARMS.get("deferred") is arms.arm("deferred")
    assert carriers.carrier("shm") is carriers.CARRIERS.get("shm")
    assert decoders.decoder("pil") is decoders.DECODERS.get("pil")
    assert {"eager", "deferred", "zero-copy", "deferred-decode"} <= set(arms.ARMS.known())
    assert {"shm", "pickle", "sglang-shm", "sglang-pickle"} <= set(carriers.CARRIERS.known())
    assert {"pil", "nvimgcodec", "nvjpeg"} <= set(decoders.DECODERS.known())
