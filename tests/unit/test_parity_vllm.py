"""``parity --runtime vllm-0.33``: every input through the one pipeline's ``vllm-uint8`` arm, held
against vLLM's path done directly (torch.equal in BF16), with the cross-runtime view per
input (size, grid and tokens beside SGLang's) and inputs vLLM refuses as rows with a reason."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch
from PIL import Image
from typer.testing import CliRunner

from kimi_bench.bench.parity import exit_code, run_parity
from kimi_bench.cli.main import app
from kimi_bench.domain.vllm_corpus import exif_jpeg, transparent_png
from kimi_bench.options import ParityOptions


def _folder(tmp_path: Path) -> Path:
    d = tmp_path / "in"
    d.mkdir()
    (d / "rotated.jpg").write_bytes(exif_jpeg(120, 64, 6))
    (d / "alpha.png").write_bytes(transparent_png(90, 60))
    px = np.random.default_rng(3).integers(0, 256, (50, 70, 3), dtype=np.uint8)
    Image.fromarray(px).save(d / "plain.png")
    torch.save(torch.zeros(3, 28, 28, dtype=torch.uint8), d / "tensor.pt")
    return d


def test_parity_under_vllm_holds_the_pipeline_to_vllms_path(tmp_path):
    opts = ParityOptions(runtime="vllm-0.33", images=_folder(tmp_path), ranks=2, device="cpu")
    report = run_parity(opts)
    rows = {r["name"]: r for r in report.results}
    assert rows["tensor.pt"]["error"] and "not tensors" in rows["tensor.pt"]["error"]
    ok = [r for r in report.results if r["error"] is None]
    assert len(ok) == 3 and all(r["bit_exact_bf16"] for r in ok)
    rot = rows["rotated.jpg"]
    assert rot["exif_rotated"] and rot["vllm_size"] == [64, 120]  # orientation 6: a quarter turn
    assert rot["grid_thw"] == rot["sglang_grid_thw"][:1] + rot["sglang_grid_thw"][:0:-1]
    assert rows["alpha.png"]["composited_white"] and rows["alpha.png"]["vs_sglang_differing"] > 0
    assert rows["plain.png"]["vs_sglang_differing"] >= 0 and not rows["plain.png"]["exif_rotated"]
    s = report.summary
    assert s["accepted"] == 3 and s["all_bit_exact_bf16"] and s["all_bit_exact_fp32"] is None
    assert s["exif_rotated"] == ["rotated.jpg"] and s["composited_white"] == ["alpha.png"]
    assert report.config["runtime_profile"]["name"] == "vllm-0.33"
    assert s["verdict"].startswith("BIT-IDENTICAL: 3 of 3") and exit_code(report) == 0


def test_the_cli_names_the_runtime_and_the_tokens_beside_sglangs(tmp_path):
    out = tmp_path / "p"
    folder = str(_folder(tmp_path))
    args = ["parity", "--runtime", "vllm-0.33", "--images", folder, "--device", "cpu"]
    res = CliRunner().invoke(app, [*args, "--out", str(out)])
    assert res.exit_code == 0, res.output
    assert "SGLang tokens" in res.output and "vllm-0.33" in res.output
    rep = json.loads((out / "report.json").read_text())
    assert rep["summary"]["tokens_differ_from_sglang"] == []  # a quarter turn keeps the count
    assert rep["recipe"]["vllm-uint8"]["rank"][:2] == ["receive", "broadcast"]
    assert "**ok**: BIT-IDENTICAL" in (out / "report.md").read_text()


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["--reference", "vllm"], "use it with a vllm --runtime"),
        (["--runtime", "vllm-0.33", "--reference", "sglang"], "use it with a sglang --runtime"),
    ],
)
def test_a_reference_of_another_runtime_is_a_usage_error(args, says, tmp_path):
    res = CliRunner().invoke(app, ["parity", *args, "--out", str(tmp_path / "p")])
    assert res.exit_code == 2 and says in " ".join(res.output.split())


def test_the_builtin_corpus_leaves_its_tensors_out_with_a_note(monkeypatch):
    """The built-in corpus's tensor inputs have no vLLM path: under vLLM they are left out
    and named in a note, not rejected (a rejected input fails the gate's all_bit_exact);
    a tensor file in a user's folder stays a row with its reason (the test above)."""
    import kimi_bench.bench.parity_vllm as pv
    from kimi_bench.domain.corpus import CorpusEntry

    img = Image.fromarray(np.full((40, 60, 3), 90, dtype=np.uint8))
    tiny = [CorpusEntry("img", "generated", lambda: img),
            CorpusEntry("tensor_c3", "generated", lambda: torch.zeros(3, 28, 28))]  # fmt: skip
    monkeypatch.setattr(pv, "builtin_corpus", lambda cfg, seed: tiny)
    monkeypatch.setattr(pv, "by_design_entries", list)
    report = run_parity(ParityOptions(runtime="vllm-0.33", ranks=1, device="cpu"))
    assert [r["name"] for r in report.results] == ["img"]
    assert report.summary["errors"] == 0 and exit_code(report) == 0
    note = next(n for n in report.notes if "left out" in n)
    assert note.startswith("1 tensor input(s) of the built-in corpus left out (tensor_c3)")
