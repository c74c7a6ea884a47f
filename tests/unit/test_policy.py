import pytest
import torch
from PIL import Image

from kimi_bench.domain.config import get_preset
from kimi_bench.domain.corpus import flip_width
from kimi_bench.domain.navit import plan_resize
from kimi_bench.domain.policy import decide_images, decide_request, processed_bytes, raw_bytes

K3 = get_preset("kimi-k3")


def rgb(w: int, h: int) -> torch.Tensor:
    return torch.zeros((3, h, w), dtype=torch.uint8)


def test_boundary_is_exact_at_28672x28():
    # processed is capped at 12 * 7168 * 28 = 2,408,448 B; raw = 84 * W
    assert flip_width(K3) == 28672
    below = decide_request([rgb(28672, 28)], [plan_resize(28672, 28, K3)])
    above = decide_request([rgb(28673, 28)], [plan_resize(28673, 28, K3)])
    assert below.defer and below.raw_bytes == below.processed_bytes == 2_408_448
    assert not above.defer and above.raw_bytes == 2_408_532
    assert "FP32 is smaller" in above.reason


def test_byte_counts():
    img = Image.new("RGBA", (640, 480))
    plan = plan_resize(640, 480, K3)
    assert raw_bytes(img, plan) == 4 * 640 * 480
    assert processed_bytes(plan) == 3 * 644 * 504 * 4


@pytest.mark.parametrize(
    ("inputs", "kwargs", "fragment"),
    [
        ([], {}, "no images"),
        ([rgb(8, 8)], {"transport": "cuda_ipc"}, "cuda_ipc keeps features"),
        ([rgb(8, 8)], {"transport": "cuda_vmm"}, "cuda_vmm keeps features"),
        ([rgb(8, 8)], {"owner_can_materialize": False}, "cannot materialize"),
        ([torch.zeros((3, 8, 8))], {}, "torch.float32, not a PIL image"),
    ],
)
def test_each_non_deferring_condition(inputs, kwargs, fragment):
    plans = [plan_resize(8, 8, K3) for _ in inputs]
    d = decide_request(inputs, plans, **kwargs)
    assert not d.defer
    assert fragment in d.reason


def test_unknown_transport_is_an_error():
    with pytest.raises(ValueError, match="unknown transport"):
        decide_request([rgb(8, 8)], [plan_resize(8, 8, K3)], transport="nvlink")


def test_request_vs_image_mode():
    inputs = [rgb(28673, 28), rgb(64, 64)]
    plans = [plan_resize(28673, 28, K3), plan_resize(64, 64, K3)]
    req = decide_images(inputs, plans, mode="request")
    img = decide_images(inputs, plans, mode="image")
    # request totals: raw 2,408,532 + 12,288 <= processed 2,408,448 + 12 * 84 * 84
    assert [d.defer for d in req] == [True, True]
    assert req[0].reason.startswith("request: ")
    assert [d.defer for d in img] == [False, True]
