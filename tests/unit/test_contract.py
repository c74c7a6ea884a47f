import pickle

import pytest
import torch
from PIL import Image

from kimi_bench.domain.config import get_preset
from kimi_bench.domain.contract import (
    DEFERRED_KEY,
    GRID_KEY,
    ContractError,
    FrozenRecord,
    MMItem,
    audit_contract,
    make_deferred_record,
)
from kimi_bench.domain.materialize import materialize, materialize_items
from kimi_bench.domain.navit import plan_resize
from kimi_bench.domain.pixels import stage_input
from kimi_bench.pipeline import deferred_item, eager_item

K3 = get_preset("kimi-k3")
CPU = torch.device("cpu")


def test_audit_passes_for_the_real_pair():
    for preset in ("kimi-k3", "kimi-k2.5"):
        result = audit_contract(get_preset(preset))
        assert result.ok and result.missing == ()
        assert "backend" in result.read and "resize_config.new_width" in result.read


def test_audit_catches_the_missing_backend_key():
    def broken_producer(plan, cfg):
        rec = dict(make_deferred_record(plan, cfg))
        del rec["backend"]
        return FrozenRecord(rec)

    result = audit_contract(K3, producer=broken_producer)
    assert not result.ok
    assert result.missing == ("backend",)


def test_audit_reports_unused_keys():
    def chatty_producer(plan, cfg):
        return FrozenRecord({**make_deferred_record(plan, cfg), "debug": 1})

    result = audit_contract(K3, producer=chatty_producer)
    assert result.ok and result.unused == ("debug",)


def test_record_is_immutable_and_picklable():
    rec = make_deferred_record(plan_resize(10, 10, K3), K3)
    with pytest.raises(TypeError):
        rec["backend"] = "cpu"  # type: ignore[index]
    assert pickle.loads(pickle.dumps(rec))["resize_config"]["new_width"] == 10


def test_item_with_several_grids_is_an_error():
    item = MMItem(
        torch.zeros((3, 4, 4), dtype=torch.uint8),
        {GRID_KEY: torch.tensor([[1, 2, 2], [1, 2, 2]])},
    )
    with pytest.raises(ContractError, match="exactly one image"):
        item.validate()


def test_deferred_item_must_be_cpu_uint8():
    item = deferred_item(Image.new("RGB", (30, 30)), plan_resize(30, 30, K3), K3)
    item.feature = item.feature.float()
    with pytest.raises(ContractError, match="CPU uint8 CHW"):
        item.validate()


def test_mixed_batch_keeps_input_order_and_values():
    imgs = [
        Image.new("RGB", (w, h), (w % 256, h % 256, 7))
        for w, h in [(60, 40), (29, 29), (100, 30), (60, 40)]
    ]
    plans = [plan_resize(*im.size, K3) for im in imgs]
    items = [
        deferred_item(imgs[0], plans[0], K3),
        eager_item(imgs[1], plans[1], K3, CPU),
        deferred_item(imgs[2], plans[2], K3),
        eager_item(imgs[3], plans[3], K3, CPU),
    ]
    assert [it.is_deferred for it in items] == [True, False, True, False]
    out = materialize_items(items, K3, CPU)
    want = materialize([stage_input(im, K3) for im in imgs], plans, K3)
    assert torch.equal(out.pixel_values, want.pixel_values)
    assert out.grid_thws.tolist() == [list(p.grid_thw) for p in plans]
    assert out.patch_counts() == [p.num_patches for p in plans]


def test_grid_disagreeing_with_record_is_caught():
    plan = plan_resize(60, 40, K3)
    item = deferred_item(Image.new("RGB", (60, 40)), plan, K3)
    item.model_specific_data[GRID_KEY] = torch.tensor([[1, 2, 2]])
    with pytest.raises(ContractError, match="disagrees"):
        materialize_items([item], K3, CPU)
    assert DEFERRED_KEY in item.model_specific_data
