"""The ``vllm-0.33`` runtime profile (issue 47): its specs, its arms and carrier, and the
refusal of every arm or carrier vLLM does not have (a usage error naming both)."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from kimi_bench.cli.main import app
from kimi_bench.domain.runtime import (
    MIB,
    PROFILES,
    UnknownRuntime,
    get_profile,
    runtime_spec,
)
from kimi_bench.options import MicroOptions, ServeCommandOptions, ServeOptions


def test_the_vllm_profile_describes_vllm_0_33():
    p = get_profile("vllm-0.33")
    assert (p.arms, p.carriers, p.decoder) == (("vllm-uint8",), ("vllm-mq",), "pil")
    assert (p.ring_max_bytes, p.arena_min_bytes) == (16 * MIB, 8 * MIB)
    assert (p.arena, p.encoder_tp_mode, p.has_preprocess_cache) == (False, "weights", False)
    assert p.summary()["encoder_tp_mode"] == "weights" and p.summary()["arena"] == "off"


@pytest.mark.parametrize("spec", ["vllm-0.33", "vllm-0.33+arena", "vllm-0.33+tp-data",
                                  "vllm-0.33+arena+tp-data"])  # fmt: skip
def test_a_spec_comes_back_as_the_same_profile(spec):
    p = get_profile(spec)
    assert p.spec == spec
    assert p.arena == ("+arena" in spec)
    assert p.encoder_tp_mode == ("data" if "+tp-data" in spec else "weights")


def test_runtime_spec_takes_the_vllm_options_and_sglang_refuses_them():
    assert runtime_spec("vllm-0.33", True, arena=True, tp_mode="data") == "vllm-0.33+arena+tp-data"
    assert runtime_spec("sglang-0.5.23", False) == "sglang-0.5.23+cache-off"
    with pytest.raises(UnknownRuntime, match="no tensor arena"):
        runtime_spec("sglang-0.5.23", True, arena=True)
    with pytest.raises(UnknownRuntime, match="unknown runtime option"):
        get_profile("vllm-0.33+fast")


@pytest.mark.parametrize("arm", ["eager", "deferred", "zero-copy", "deferred-decode"])
def test_every_sglang_arm_is_refused_under_vllm_naming_arm_and_runtime(arm):
    with pytest.raises(UnknownRuntime) as exc:
        get_profile("vllm-0.33").check_arms([arm])
    assert f"arm {arm!r}" in str(exc.value) and "vllm-0.33" in str(exc.value)


def test_the_vllm_arm_and_carrier_are_refused_under_sglang():
    for name in ("sglang-0.5.23", "pr-33921"):
        with pytest.raises(
            UnknownRuntime, match=f"arm 'vllm-uint8' does not exist in runtime {name}"
        ):
            PROFILES[name].check_arms(["vllm-uint8"])
        with pytest.raises(UnknownRuntime, match="carrier 'vllm-mq'"):
            PROFILES[name].check_arms(["eager"], "vllm-mq")


def test_micro_options_under_vllm_default_to_its_arm_and_carrier():
    o = MicroOptions(runtime="vllm-0.33", vllm_arena=True, encoder_tp_mode="data")
    spec = "vllm-0.33+arena+tp-data"
    assert (o.arms, o.transport, o.runtime_spec) == (("vllm-uint8",), "vllm-mq", spec)
    sglang = MicroOptions()
    assert (sglang.arms, sglang.transport) == (("eager", "deferred"), "shm")


@pytest.mark.parametrize(
    ("given", "named"),
    [
        ({"arms": "eager,deferred"}, "arm 'eager'"),
        ({"transport": "shm"}, "carrier 'shm'"),
        ({"arms": "vllm-uint8", "transport": "sglang-shm"}, "carrier 'sglang-shm'"),
    ],
)
def test_micro_options_refuse_what_vllm_does_not_have(given, named):
    with pytest.raises(ValueError, match=named):
        MicroOptions(runtime="vllm-0.33", **given)


def test_serve_options_under_vllm_take_its_arm_and_carrier_and_refuse_others():
    s = ServeOptions(runtime="vllm-0.33")
    assert (s.arms, s.transport) == (("vllm-uint8",), "vllm-mq")
    with pytest.raises(ValueError, match=r"arm 'eager' does not exist in runtime vllm-0\.33"):
        ServeOptions(runtime="vllm-0.33", arms="eager,deferred")
    with pytest.raises(ValueError, match="no tensor arena"):
        ServeOptions(vllm_arena=True)
    server = ServeCommandOptions(runtime="vllm-0.33", encoder_tp_mode="data")
    assert (server.arm, server.transport, server.runtime_spec) == (
        "vllm-uint8", "vllm-mq", "vllm-0.33+tp-data",
    )  # fmt: skip
    with pytest.raises(ValueError, match="carrier 'vllm-mq' does not exist in runtime"):
        ServeCommandOptions(arm="eager", transport="vllm-mq")


@pytest.mark.parametrize(
    ("args", "named"),
    [
        (["--runtime", "vllm-0.33", "--arms", "eager"], "arm 'eager' does not exist in runtime"),
        (["--arms", "vllm-uint8"], "arm 'vllm-uint8' does not exist in runtime sglang-0.5.23"),
    ],
)
def test_the_cli_refuses_an_arm_the_runtime_lacks_with_exit_2(args, named, tmp_path):
    result = CliRunner().invoke(app, ["micro", *args, "--output-dir", str(tmp_path / "m")])
    assert result.exit_code == 2
    assert named in " ".join(result.output.split())
    assert not (tmp_path / "m").exists()
