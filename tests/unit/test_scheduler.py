import torch

from kimi_bench.domain.scheduler import assign_owners, images_of_rank, needs_pre_embed_move
from tests.gather_emulation import gather_in_order


def test_largest_first_to_least_loaded():
    # sorted: idx1(9) idx2(9) idx0(5) idx4(3) idx3(1)
    # r0:9 r1:9 -> idx0 tie -> r0 (14) -> idx4 r1 (12) -> idx3 r1 (13)
    assert assign_owners([5, 9, 9, 1, 3], 2) == [0, 0, 1, 1, 1]


def test_ties_go_to_lowest_rank_and_sort_is_stable():
    assert assign_owners([4, 4, 4, 4], 3) == [0, 1, 2, 0]
    assert assign_owners([1, 1], 8) == [0, 1]
    assert assign_owners([], 4) == []
    assert assign_owners([7], 1) == [0]


def test_images_of_rank_in_original_order():
    owners = [1, 0, 1, 1]
    assert images_of_rank(owners, 1) == [0, 2, 3]
    assert images_of_rank(owners, 0) == [1]


def test_whitelist():
    assert not needs_pre_embed_move("KimiK3ForConditionalGeneration")
    assert not needs_pre_embed_move("Qwen3VLForConditionalGeneration")
    assert needs_pre_embed_move("LlavaForConditionalGeneration")


def test_gather_restores_order_and_strips_padding():
    sizes = [2, 5, 1, 3]
    owners = assign_owners(sizes, 2)  # [1, 0, 1, 1]: r0 = {1}, r1 = {0, 2, 3}
    rows = [torch.full((n, 2), float(i)) for i, n in enumerate(sizes)]
    rank_out = [torch.cat([rows[i] for i in images_of_rank(owners, r)]) for r in range(2)]
    out = gather_in_order(rank_out, owners, sizes)
    assert torch.equal(out, torch.cat(rows))


def test_gather_single_image_is_broadcast_from_owner():
    out = gather_in_order([torch.zeros(0, 2), torch.ones(3, 2)], [1], [3])
    assert torch.equal(out, torch.ones(3, 2))
