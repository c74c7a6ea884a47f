import io
import json
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
from PIL import Image
from typer.testing import CliRunner

from kimi_bench.bench.parity import RESULT_KEYS
from kimi_bench.cli.main import app

runner = CliRunner()


def _png_bytes(img: Image.Image) -> bytes:
    buf = io.BytesIO()
    img.save(buf, format="PNG")
    return buf.getvalue()


@pytest.fixture
def mixed_folder(tmp_path: Path) -> Path:
    d = tmp_path / "imgs"
    d.mkdir()
    rng = np.random.default_rng(0)
    Image.fromarray(rng.integers(0, 256, (90, 120, 3), dtype=np.uint8)).save(d / "photo.jpg")
    rgba = rng.integers(0, 256, (70, 50, 4), dtype=np.uint8)
    Image.fromarray(rgba).save(d / "alpha.png")
    pal = Image.fromarray(rng.integers(0, 256, (40, 60, 3), dtype=np.uint8)).quantize(16)
    pal.save(d / "palette.png", transparency=3)
    # bad inputs: each must become a per-image error, and nothing else is lost
    (d / "empty.png").write_bytes(b"")
    (d / "corrupt.jpg").write_bytes(b"\xff\xd8\xff\xe0 definitely not a jpeg")
    (d / "truncated.png").write_bytes(_png_bytes(Image.new("RGB", (64, 64), "red"))[:60])
    Image.new("1", (3000, 3000)).save(d / "bomb.png")  # 9 M pixels > --max-pixels below
    np.save(d / "hwc.npy", np.zeros((48, 64, 3), dtype=np.uint8))
    torch.save(torch.zeros((3, 20, 30), dtype=torch.float32), d / "float.pt")
    return d


def test_folder_with_bad_inputs(mixed_folder: Path, tmp_path: Path):
    out, dump = tmp_path / "out", tmp_path / "dump"
    res = runner.invoke(
        app,
        [
            "parity",
            "--images",
            str(mixed_folder),
            "--device",
            "cpu",
            "--out",
            str(out),
            "--dump",
            str(dump),
            "--max-pixels",
            "4000000",
        ],
    )
    assert res.exit_code == 0, res.output
    report = json.loads((out / "report.json").read_text())
    assert report["kind"] == "parity" and report["schema_version"] == 2
    rows = {r["name"]: r for r in report["results"]}
    assert set(RESULT_KEYS) <= set(rows["photo.jpg"])
    for good in ("photo.jpg", "alpha.png", "palette.png", "float.pt"):
        assert rows[good]["error"] is None, good
        assert rows[good]["bit_exact_fp32"] is True and rows[good]["bit_exact_bf16"] is True
    assert rows["float.pt"]["deferred"] is False
    assert "float32" in rows["float.pt"]["reason"]
    assert rows["alpha.png"]["mode"] == "RGBA" and rows["palette.png"]["mode"] == "P"
    assert rows["empty.png"]["error"].endswith("zero-byte file")
    assert "not an image" in rows["corrupt.jpg"]["error"]
    assert "corrupt or truncated" in rows["truncated.png"]["error"]
    assert "decompression bomb guard" in rows["bomb.png"]["error"]
    assert "looks like HWC" in rows["hwc.npy"]["error"]
    assert report["summary"]["errors"] == 5 and report["summary"]["accepted"] == 4
    # dumps: eager and deferred FP32 with the grid
    d = torch.load(dump / "alpha.png.pt")  # dump names keep the extension (unique per input)
    assert torch.equal(d["eager"], d["deferred"]) and d["eager"].dtype == torch.float32
    assert d["grid_thw"].tolist() == rows["alpha.png"]["grid_thw"]
    assert (out / "report.md").exists() and (out / "parity.csv").exists()


def test_empty_folder_exits_2(tmp_path: Path):
    (tmp_path / "none").mkdir()
    res = runner.invoke(
        app, ["parity", "--images", str(tmp_path / "none"), "--out", str(tmp_path / "o")]
    )
    assert res.exit_code == 2
    assert "NO INPUTS" in res.output
    assert json.loads((tmp_path / "o" / "report.json").read_text())["results"] == []


@pytest.mark.parametrize(
    "args",
    [
        ["--preset", "kimi-k9"],
        ["--ranks", "0"],
        ["--policy", "sometimes"],
        ["--config", "/nonexistent/preprocessor_config.json"],
    ],
)
def test_usage_errors_exit_2(args, tmp_path: Path):
    res = runner.invoke(app, ["parity", "--out", str(tmp_path / "o"), *args])
    assert res.exit_code == 2, res.output


def test_a_differing_image_exits_1(mixed_folder: Path, tmp_path: Path, monkeypatch):
    import kimi_bench.pipeline.steps as arms

    real = arms.materialize_items

    def off_by_one_ulp(items, cfg, device):
        batch = real(items, cfg, device)
        if any(it.is_deferred for it in items):
            batch.pixel_values = torch.nextafter(batch.pixel_values, torch.tensor(9.0))
        return batch

    monkeypatch.setattr(arms, "materialize_items", off_by_one_ulp)
    res = runner.invoke(
        app,
        [
            "parity",
            "--images",
            str(mixed_folder),
            "--device",
            "cpu",
            "--out",
            str(tmp_path / "o"),
            "--max-pixels",
            "4000000",
        ],
    )
    assert res.exit_code == 1
    report = json.loads((tmp_path / "o" / "report.json").read_text())
    assert report["summary"]["all_bit_exact_fp32"] is False
    assert "photo.jpg" in report["summary"]["differing"]


def test_checkpoint_config_file(tmp_path: Path, mixed_folder: Path):
    cfg = {
        "media_proc_cfg": {
            "in_patch_limit": 1024,
            "patch_limit_on_one_side": 64,
            "transparent_bg_config": {"pattern": "chessboard"},
        }
    }
    path = tmp_path / "preprocessor_config.json"
    path.write_text(json.dumps(cfg))
    res = runner.invoke(
        app,
        [
            "parity",
            "--images",
            str(mixed_folder),
            "--config",
            str(path),
            "--out",
            str(tmp_path / "o"),
            "--max-pixels",
            "4000000",
        ],
    )
    assert res.exit_code == 0, res.output
    report = json.loads((tmp_path / "o" / "report.json").read_text())
    bg = report["config"]["preprocess"]["transparent_bg_config"]
    # omitted chessboard keys take the runtime's fallbacks
    assert bg == {
        "pattern": "chessboard",
        "chessboard_square_size": 16,
        "chessboard_white_value": 255,
        "chessboard_gray_value": 200,
        "chessboard_square_on_top_left": True,
    }


@pytest.mark.slow
def test_checkpoint_config_with_runtime_chessboard_keys(tmp_path: Path, mixed_folder: Path):
    """A checkpoint's preprocessor_config.json written with the runtime's key names loads,
    parity over it is bit-exact, and the deferred record carries the same names."""
    from kimi_bench.domain.config import load_preprocessor_config
    from kimi_bench.domain.contract import make_deferred_record
    from kimi_bench.domain.navit import plan_resize

    bg = {
        "pattern": "chessboard",
        "chessboard_square_size": 16,
        "chessboard_white_value": 255,
        "chessboard_gray_value": 200,
        "chessboard_square_on_top_left": False,
    }
    path = tmp_path / "preprocessor_config.json"
    path.write_text(json.dumps({"media_proc_cfg": {"transparent_bg_config": bg}}))
    cfg = load_preprocessor_config(path)
    record = make_deferred_record(plan_resize(64, 48, cfg), cfg)
    assert dict(record["transparent_bg_config"]) == bg
    res = runner.invoke(
        app,
        [
            "parity",
            "--images",
            str(mixed_folder),
            "--config",
            str(path),
            "--out",
            str(tmp_path / "o"),
        ],
    )
    assert res.exit_code == 0, res.output
    report = json.loads((tmp_path / "o" / "report.json").read_text())
    assert report["summary"]["all_bit_exact_bf16"] is True
    assert report["config"]["preprocess"]["transparent_bg_config"] == bg


def test_old_chessboard_key_names_warn_and_unknown_keys_fail():
    from kimi_bench.domain.config import BackgroundConfig, ConfigError

    with pytest.warns(DeprecationWarning, match="chessboard_square_size"):
        old = BackgroundConfig.from_mapping({"pattern": "chessboard", "square_size": 4})
    assert old.chessboard_square_size == 4
    with pytest.raises(ConfigError, match="'squaresize'"):
        BackgroundConfig.from_mapping({"pattern": "chessboard", "squaresize": 4})


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the no-CUDA message")
@pytest.mark.parametrize("cmd", [["parity"], ["micro", "--images", "1x8x8"]])
def test_cuda_without_a_gpu_is_a_usage_error(cmd, tmp_path: Path):
    res = runner.invoke(app, [*cmd, "--device", "cuda", "--out", str(tmp_path / "o")])
    assert res.exit_code == 2
    assert "sees no CUDA device" in res.output
    assert not (tmp_path / "o").exists()  # refused before any work


@pytest.mark.slow
def test_a_vllm_parity_report_reads_back_through_render_and_gate(tmp_path: Path):
    """vLLM's rows have no FP32 verdict (None): the one parity derivation reads them as
    such, so render and gate take the report (they refused it, naming results[0])."""
    d = tmp_path / "imgs"
    d.mkdir()
    rng = np.random.default_rng(1)
    Image.fromarray(rng.integers(0, 256, (60, 80, 3), dtype=np.uint8)).save(d / "a.jpg")
    Image.fromarray(rng.integers(0, 256, (50, 40, 4), dtype=np.uint8)).save(d / "b.png")
    exe = shutil.which("kimi-bench") or str(Path(sys.executable).parent / "kimi-bench")
    out = tmp_path / "out"

    def kb(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([exe, *args], capture_output=True, text=True, timeout=300)

    made = kb("parity", "--runtime", "vllm-0.33", "--images", str(d), "--device", "cpu",
              "--output-dir", str(out))  # fmt: skip
    assert made.returncode == 0, made.stderr
    rep = json.loads((out / "report.json").read_text())
    assert rep["summary"]["all_bit_exact_fp32"] is None and rep["summary"]["accepted"] == 2
    shown = kb("render", str(out), "--html", str(tmp_path / "p.html"))
    assert shown.returncode == 0, shown.stderr
    gated = kb("gate", str(out), "--allow-no-baseline")
    assert gated.returncode == 0, gated.stdout + gated.stderr
    assert "gate PASS: 2 passed of 2 rules" in gated.stdout, gated.stdout
    rep["summary"]["accepted"] = 3  # an edited figure: the same derivation refuses it
    (out / "report.json").write_text(json.dumps(rep))
    edited = kb("render", str(out), "--html", str(tmp_path / "q.html"))
    assert edited.returncode != 0
    assert "summary.accepted says 3 but the rows give 2" in edited.stderr
