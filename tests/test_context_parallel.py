"""Notebook 10's checks on their own: the references they compare with, and what a rank's record
says about overlap, without running a notebook."""

from __future__ import annotations

import matplotlib
import pytest
import torch

from autograder.combined_parallelism.planner import cp_bytes_per_layer, read_spec
from autograder.context_parallel import layouts, planning, recording, ulysses

matplotlib.use("Agg")


def test_zigzag_gives_every_rank_the_same_causal_work() -> None:
    for world_size in (1, 2, 3, 4, 8):
        layout = layouts.reference_zigzag_layout(4 * world_size, world_size)
        pairs = [len(layouts.visible_pairs(layout, r, causal=True)) for r in range(world_size)]
        assert pairs == [2 * world_size + 1] * world_size
        flops = {layouts.block_flops(layout, r, True, 2, 4) for r in range(world_size)}
        assert len(flops) == 1
    contiguous = layouts.contiguous_layout(12, 3)
    assert [len(layouts.visible_pairs(contiguous, r, True)) for r in range(3)] == [1, 2, 3]


@pytest.mark.parametrize(("seq_len", "world_size"), [(7, 2), (10, 4), (17, 4), (5, 1)])
def test_unshard_undoes_take_and_chunks_cut_as_tensor_split(seq_len: int, world_size: int) -> None:
    x = torch.randn(2, seq_len, 3)
    for layout in (
        layouts.reference_zigzag_layout(seq_len, world_size),
        layouts.contiguous_layout(seq_len, world_size),
    ):
        assert torch.equal(layouts.reference_unshard([layouts.take(x, s) for s in layout], layout), x)
    sizes = [b - a for a, b in layouts.chunk_bounds(seq_len, 2 * world_size)]
    assert sizes == [len(c) for c in torch.tensor_split(torch.arange(seq_len), 2 * world_size)]


def test_the_overlap_record_tells_a_blocking_ring_from_an_overlapped_one() -> None:
    def post(i: int, direction: str = "recv") -> tuple:
        return ("post", i, direction, 0, 8)

    matmul = ("matmul", 64, 4)
    overlapped = [post(0, "send"), post(1), matmul, ("wait", 1), matmul]
    blocking = [matmul, post(0, "send"), post(1), ("wait", 1), matmul]
    waited_first = [post(0, "send"), post(1), ("wait", 1), matmul, matmul]
    assert recording.computed_with_nothing_in_flight(overlapped) == 0
    assert recording.computed_with_nothing_in_flight(blocking) == 1
    assert recording.computed_with_nothing_in_flight(waited_first) == 0  # nothing left to come
    assert (
        recording.computed_with_nothing_in_flight([post(1), ("wait", 1), matmul, post(2), ("wait", 2)]) == 1
    )


def test_the_bytes_reference_is_the_planner_s() -> None:
    for spec in planning.bytes_cases(hidden=True):
        assert planning.reference_cp_bytes_per_layer(spec) == pytest.approx(
            cp_bytes_per_layer(read_spec(spec))
        )


def test_cp_groups_cover_the_mesh_once() -> None:
    sizes = {"dp": 2, "pp": 2, "cp": 3, "tp": 2}
    groups = {tuple(planning.reference_cp_group(r, sizes)) for r in range(24)}
    assert sorted(r for g in groups for r in g) == list(range(24))
    assert planning.reference_cp_group(0, sizes) == [0, 2, 4]


def test_the_choice_follows_bytes_then_memory_then_preference() -> None:
    assert ulysses.reference_choice(131072, 16, 1, 128, 16, 1e9) == "all_gather"  # Llama 3, per GPU
    assert ulysses.reference_choice(1048576, 16, 1, 128, 16, 1e8) == "ring"  # the gather does not fit
    assert ulysses.reference_choice(131072, 32, 32, 128, 8, 1e9) == "ulysses"  # multi-head
    assert ulysses.reference_choice(1048576, 16, 2, 128, 16, 1e6) is None


def test_the_block_view_draws_both_layouts() -> None:
    from visuals.attention_blocks import causal_work, chunk_owners, draw_attention_blocks

    layout = layouts.reference_zigzag_layout(8, 4)
    assert causal_work(chunk_owners(layout, 8), 4) == [8.0] * 4  # 32 blocks, a diagonal one half
    figure = draw_attention_blocks({"contiguous": layouts.contiguous_layout(8, 4), "zig-zag": layout}, 4)
    assert len(figure.axes) == 2
