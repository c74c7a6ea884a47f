"""Properties of the resize plan over many sizes (hypothesis), beyond the golden table."""

from hypothesis import given, settings
from hypothesis import strategies as st

from kimi_bench.domain.config import get_preset
from kimi_bench.domain.navit import plan_resize

sizes = st.integers(min_value=1, max_value=40_000)


@settings(max_examples=400, deadline=None)
@given(w=sizes, h=sizes, preset=st.sampled_from(["kimi-k3", "kimi-k2.5"]))
def test_plan_invariants(w, h, preset):
    cfg = get_preset(preset)
    p = plan_resize(w, h, cfg)
    side = cfg.patch_limit_on_one_side * cfg.patch_size
    assert 1 <= p.new_width <= min(w, side) and 1 <= p.new_height <= min(h, side)  # never up
    assert p.padded_width % 28 == 0 and p.padded_height % 28 == 0
    assert 0 <= p.pad_width < 28 and 0 <= p.pad_height < 28
    t, gh, gw = p.grid_thw
    assert t == 1 and p.num_tokens == (gh // 2) * (gw // 2)
    # the limit is met only up to flooring: s1 is computed from floor(W/14) * floor(H/14)
    # of the *source*, so the plan may exceed in_patch_limit by (1 + 1/fw)(1 + 1/fh);
    # e.g. 1024x3154 under K2.5 plans 73 * 225 = 16425 patches (16724 padded) for 16384.
    fw, fh = max(1, w // 14), max(1, h // 14)
    bound = cfg.in_patch_limit * (1 + 1 / fw) * (1 + 1 / fh)
    assert (p.new_width // 14) * (p.new_height // 14) <= bound + 1e-6
    # aspect ratio is kept up to truncation
    if p.new_width > 1 and p.new_height > 1:
        assert (
            abs(p.new_width / p.new_height - w / h)
            <= (w / h) * (1 / p.new_height + 1 / p.new_width) + 1e-9
        )
