"""Inputs checked for what the arithmetic will do with them, and nothing dropped without a
word: an arm given twice, normalization values float32 cannot hold, non-finite pixels in
every image mode, integer tensors outside 8-bit values, a rate that overflows to inf,
--arms beside --endpoint, a misspelt config key, hidden and non-UTF-8 file names, and
nesting too deep for the JSON and TOML readers (files and the HTTP server)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import pytest
import torch
from PIL import Image

from tests.bad_inputs.cli import flat, kimi, png_folder
from tests.serve_helpers import chat_body, jpeg, serve_process

pytestmark = pytest.mark.slow  # each case starts a kimi-bench process (~1 s)

DEEP = 100_000  # arrays inside arrays: far beyond Python's recursion limit


# ---------------------------------------------------------------------- option values


def test_micro_with_an_arm_given_twice_is_refused() -> None:
    res = kimi("micro", "--arms", "eager,eager", "--device", "cpu")
    assert res.returncode == 2, flat(res)
    assert "--arms: arm names must be given and distinct, got eager, eager" in flat(res)


@pytest.mark.parametrize("rate", ["1e400", "2,1e999"])
def test_a_rate_that_overflows_to_inf_is_refused(rate: str) -> None:
    res = kimi("serve-ab", "--request-rate", rate)
    assert res.returncode == 2, flat(res)
    assert "too large for a number; write inf for no rate limit" in flat(res)


def test_arms_beside_endpoints_are_refused_not_ignored() -> None:
    res = kimi("serve-ab", "--endpoint", "a=http://127.0.0.1:9", "--arms", "eager,deferred")
    assert res.returncode == 2, flat(res)
    assert "--arms eager,deferred does not apply with --endpoint" in flat(res)
    assert "the arms are the endpoints' names (a)" in flat(res)


@pytest.mark.parametrize("option", ["--note", "--metadata"])
def test_text_options_that_are_not_utf8_are_refused(option: str) -> None:
    value = os.fsdecode(b"k=bad\xffbytes")  # what a shell's $'\xff' hands over
    res = kimi("parity", option, value, "--device", "cpu")
    assert res.returncode == 2, flat(res)
    assert "is not valid UTF-8 text" in flat(res) and "\\xff" in flat(res)


@pytest.mark.slow
def test_an_internal_error_with_non_utf8_arguments_still_exits_4_in_one_line(
    tmp_path: Path,
) -> None:
    """The crash file records the command line; bytes that are not UTF-8 in it are escaped,
    not a second error (which once ended in a raw traceback and exit 1)."""
    example = Path(__file__).resolve().parents[2] / "reports" / "examples" / "cpu-run" / "parity"
    code = (
        "import sys, kimi_bench.cli.main as m, kimi_bench.report.rerender as r\n"
        "def boom(*a, **k):\n    raise RuntimeError('boom in render')\n"
        "r.render_tree = boom\n"
        "sys.argv = ['kimi-bench', 'render', sys.argv[1], '--html', sys.argv[2]]\n"
        "m.main()\n"
    )
    page = os.fsdecode(os.fsencode(tmp_path) + b"/p\xffage.html")
    res = subprocess.run([sys.executable, "-c", code, str(example), page], capture_output=True,
                         text=True, errors="replace", timeout=300, check=False)  # fmt: skip
    assert res.returncode == 4, res.stderr
    assert "internal error: RuntimeError: boom in render" in res.stderr
    assert "Traceback" not in res.stderr and "UnicodeEncodeError" not in res.stderr
    crash = Path(res.stderr.split("traceback: ")[-1].strip())
    try:
        assert "p\\xffage.html" in crash.read_text()  # the argument, escaped
    finally:
        crash.unlink(missing_ok=True)


# ------------------------------------------------------------------- checkpoint configs


@pytest.mark.parametrize(
    ("std", "words"),
    [
        (1e-46, "image_std 1e-46 is 0 in float32"),
        (1e-39, "image_std 1e-39 is subnormal in float32"),
    ],
)
def test_image_std_float32_cannot_hold_is_refused(tmp_path: Path, std: float, words: str) -> None:
    cfg = tmp_path / "preprocessor_config.json"
    cfg.write_text(json.dumps({"media_proc_cfg": {"image_std": [std, 0.5, 0.5]}}))
    res = kimi("parity", "--config", str(cfg), "--device", "cpu")
    assert res.returncode == 2, flat(res)
    assert words in flat(res) and str(cfg) in flat(res)


def test_features_that_overflow_bfloat16_are_refused(tmp_path: Path) -> None:
    cfg = tmp_path / "preprocessor_config.json"  # 1e38 / 2e-38 overflows: inf features
    cfg.write_text(json.dumps({"image_mean": 1e38, "image_std": 2e-38}))
    res = kimi("parity", "--config", str(cfg), "--device", "cpu")
    assert res.returncode == 2, flat(res)
    assert "overflow float32/bfloat16" in flat(res)


@pytest.mark.parametrize(
    ("body", "key", "meant"),
    [
        ({"media_proc_cfg": {"patch_sise": 16}}, "patch_sise", "patch_size"),
        ({"patch_sise": 16}, "patch_sise", "patch_size"),
        ({"media_proc_cgf": {"patch_size": 16}}, "media_proc_cgf", "media_proc_cfg"),
    ],
)
def test_a_misspelt_config_key_is_refused_with_the_close_match(
    tmp_path: Path, body: dict[str, Any], key: str, meant: str
) -> None:
    cfg = tmp_path / "preprocessor_config.json"
    cfg.write_text(json.dumps(body))
    res = kimi("parity", "--config", str(cfg), "--device", "cpu")
    assert res.returncode == 2, flat(res)
    assert f"unknown key {key!r}: did you mean {meant!r}?" in flat(res)


def test_keys_of_a_real_checkpoint_that_kimi_bench_does_not_read_pass(tmp_path: Path) -> None:
    from kimi_bench.domain.config import load_preprocessor_config

    cfg = tmp_path / "preprocessor_config.json"
    body = {"temporal_merge_kernel_size": 1, "in_patch_limit_each_frame": 4096, "patch_size": 14}
    cfg.write_text(json.dumps({"processor_class": "X", "media_proc_cfg": body}))
    assert load_preprocessor_config(cfg).patch_size == 14  # not typos: accepted


# ------------------------------------------------------------ one folder of odd inputs


@pytest.fixture(scope="module")
def odd_folder_run(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """One parity run over a folder of every odd input below (shared by the tests)."""
    root = tmp_path_factory.mktemp("odd")
    images = png_folder(root / "img", ("ok.png", ".hidden.png", "..png"))
    bad_name = os.fsencode(images) + b"/inv\xffalid.png"
    with open(bad_name, "wb") as fh:
        fh.write((images / "ok.png").read_bytes())
    for name, value in (("nan.tif", np.nan), ("inf.tif", np.inf)):
        arr = np.full((30, 40), 7.0, np.float32)
        arr[3, 4] = value
        Image.fromarray(arr, mode="F").save(images / name)
    Image.fromarray(np.full((30, 40), 7.5, np.float32), mode="F").save(images / "finite.tif")
    torch.save(torch.arange(-500, 1000).reshape(1, 30, 50), images / "int64.pt")
    torch.save(torch.full((3, 20, 30), 200, dtype=torch.int32), images / "int32_in_range.pt")
    out = root / "o"
    res = kimi("parity", "--images", str(images), "--device", "cpu", "--output-dir", str(out))
    report = json.loads((out / "report.json").read_text())
    md = (out / "report.md").read_text(encoding="utf-8")
    return {"res": res, "rows": {r["name"]: r for r in report["results"]}, "md": md}


# the tests of the shared run keep to one worker (xdist), which runs it once
ODD = pytest.mark.xdist_group("odd_folder_run")


@ODD
@pytest.mark.slow
def test_the_odd_folder_runs_to_the_end(odd_folder_run: dict[str, Any]) -> None:
    res = odd_folder_run["res"]
    assert res.returncode == 0, flat(res)  # no traceback, no exit 4: rows say what failed
    assert "internal error" not in flat(res)


@ODD
@pytest.mark.slow
@pytest.mark.parametrize("name", ["nan.tif", "inf.tif"])
def test_non_finite_pixels_of_a_float_image_are_refused(
    odd_folder_run: dict[str, Any], name: str
) -> None:
    row = odd_folder_run["rows"][name]
    assert row["bit_exact_fp32"] is None, row  # never called bit-exact
    assert "invalid image: 1 of 1,200 pixels" in row["error"] and "not finite" in row["error"]
    assert odd_folder_run["rows"]["finite.tif"]["error"] is None


@ODD
@pytest.mark.slow
def test_an_integer_tensor_outside_8_bit_values_is_not_an_image(
    odd_folder_run: dict[str, Any],
) -> None:
    row = odd_folder_run["rows"]["int64.pt"]
    assert "int64 values -500..999 are not 8-bit pixel values (0..255)" in row["error"]
    assert odd_folder_run["rows"]["int32_in_range.pt"]["error"] is None


@ODD
@pytest.mark.slow
@pytest.mark.parametrize("name", [".hidden.png", "..png"])
def test_hidden_files_get_a_row_saying_why(odd_folder_run: dict[str, Any], name: str) -> None:
    row = odd_folder_run["rows"][name]
    assert "a hidden file (its name starts with a dot): not read" in row["error"]


@ODD
@pytest.mark.slow
def test_a_file_name_that_is_not_utf8_is_read_and_shown_escaped(
    odd_folder_run: dict[str, Any],
) -> None:
    row = odd_folder_run["rows"]["inv\\xffalid.png"]
    assert row["error"] is None and row["bit_exact_fp32"] is True
    assert "not valid UTF-8" in row["warning"]
    assert "inv\\\\xffalid.png" in odd_folder_run["md"]  # markdown escapes the backslash


# --------------------------------------------------------------- nesting too deep


def _deep_json() -> str:
    return "[" * DEEP + "]" * DEEP


def _deep_object() -> str:
    return '{"a":' * DEEP + "1" + "}" * DEEP


@pytest.mark.slow
@pytest.mark.parametrize(
    ("what", "args", "text"),
    [
        ("config", ("parity", "--config", "{f}"), _deep_object),
        ("history", ("gate", "--history", "{f}"), _deep_object),
        ("rules", ("gate", "--rules", "{f}", "{f}"), lambda: "a = " + _deep_json()),
        ("scenario", ("run", "--scenario", "{f}"), lambda: "a = " + _deep_json()),
        ("import", ("import", "{f}", "--output-dir", "{o}"), _deep_json),
    ],
)
def test_input_nested_too_deeply_is_a_usage_error(
    tmp_path: Path, what: str, args: tuple[str, ...], text: Any
) -> None:
    f = tmp_path / f"deep-{what}"
    f.write_text(text())
    res = kimi(*(a.format(f=f, o=tmp_path / "o") for a in args))
    assert res.returncode == 2, flat(res)
    assert "levels deep" in flat(res) and "internal error" not in flat(res)


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    proc, url, _ = serve_process(tmp_path_factory.mktemp("serve"), "--arm", "deferred")
    with proc:
        yield url


@pytest.mark.slow
def test_deeply_nested_json_posted_to_serve_is_a_400(served: str) -> None:
    body = ('{"model": "x", "messages": ' + _deep_json() + "}").encode()
    r = httpx.post(served + "/v1/chat/completions", content=body, timeout=60)
    assert r.status_code == 400, r.text
    assert "levels deep" in r.json()["error"]["message"]
    ok = httpx.post(served + "/v1/chat/completions", json=chat_body([jpeg()]), timeout=120)
    assert ok.status_code == 200  # the server goes on serving
