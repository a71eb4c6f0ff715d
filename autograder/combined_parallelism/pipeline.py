"""Notebook 08's check of pipeline x data parallel training: each rank's stage equal to its layers
of one process's trained model, its messages to the stages next to it in its own replica, and its
gradient average on its stage's data-parallel group."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import torch

from ..checks import counted, fail, fresh_seed, run_ranks
from ..comm import CommLog
from ..data_parallel.training import RowsRead
from .groups import GroupLog
from .model import LAYERS, make_data, make_deep_model, train_deep_alone
from .training import _article, _params_mistake


def _run(
    rank: int,
    world_size: int,
    train: Callable,
    dp: int,
    pp: int,
    rows: int,
    steps: int,
    lr: float,
    micro_batches: int,
    seed: int,
):
    log: list = []
    dataset = RowsRead(*make_data(rows, seed), log)
    models: list = []

    def make_model() -> torch.nn.Sequential:
        models.append(make_deep_model(seed + 1))
        return models[-1]

    with CommLog(count_collectives=False) as messages, GroupLog() as groups:
        params = train(rank, world_size, dp, pp, make_model, dataset, steps, lr, micro_batches)
    if isinstance(params, (list, tuple)):
        params = [p.detach().clone() if isinstance(p, torch.Tensor) else p for p in params]
    peers = sorted({m.peer for m in messages.messages})
    # The layers of the models it made that a backward reached: the layers this rank trained.
    trained = sorted(
        {
            i
            for model in models
            for i, layer in enumerate(model)
            if any(p.grad is not None for p in layer.parameters())
        }
    )
    return params, sorted({row for kind, row in log if kind == "read"}), groups.summary(), peers, trained


def _span(layers: list[int]) -> str:
    if len(layers) == 1:
        return f"layer {layers[0]}"
    if layers == list(range(layers[0], layers[-1] + 1)):
        return f"layers {layers[0]} to {layers[-1]}"
    return f"layers {layers}"


def check_pp_dp(
    train: Callable,
    shapes: Sequence[tuple[int, int]] = ((2, 2),),
    rows_per_replica: int = 4,
    micro_batches: int = 2,
    steps: int = 2,
    lr: float = 0.1,
) -> None:
    """Check ``train(rank, world_size, dp, pp, make_model, dataset, steps, lr, micro_batches)`` for
    each (dp, pp): ranks laid out with pp inner (rank = replica * pp + stage), each returning its
    stage's parameters, equal to one process's; sends and receives only to the neighbouring stages
    of its replica; collectives only on its stage's data-parallel group; each replica's rows its own."""
    __tracebackhide__ = True
    name = getattr(train, "__name__", "train")
    seed = fresh_seed()
    for dp, pp in shapes:
        rows = rows_per_replica * dp
        data, targets = make_data(rows, seed)
        full = train_deep_alone(seed + 1, data, targets, steps, lr)
        world_average = train_deep_alone(seed + 1, data, targets, steps, lr / pp)
        what = (
            f"{name} with dp={dp}, pp={pp} ({counted(dp * pp, 'rank')}), {rows} rows, "
            f"{micro_batches} micro-batches, {counted(steps, 'step')}"
        )
        mixed_stages = (
            "ranks of different stages met in one collective, which torch found they disagree on: a group "
            "that spans stages (the whole world, say) mixes stages that hold different layers. A stage's "
            "gradients are averaged with the same stage's in the other replicas only."
        )
        results = run_ranks(
            _run,
            dp * pp,
            train,
            dp,
            pp,
            rows,
            steps,
            lr,
            micro_batches,
            seed,
            what=what,
            timeout=40,
            diagnoses={"mismatched collectives": mixed_stages},
        )

        def own(stage: int, params: list, pp: int = pp) -> list:  # a weight and a bias a layer
            return params[2 * (stage * LAYERS // pp) : 2 * ((stage + 1) * LAYERS // pp)]

        misplaced = ""
        for rank, (*_, trained) in enumerate(results):
            replica, stage = divmod(rank, pp)
            layers = list(range(stage * LAYERS // pp, (stage + 1) * LAYERS // pp))
            if trained and trained != layers and not misplaced:
                misplaced = (
                    f"{what}: rank {rank} (replica {replica}, stage {stage}) trained the model's "
                    f"{_span(trained)}, not its stage's {_span(layers)}."
                )
        shares: dict[int, list[int]] = {}
        for rank, (params, read, calls, peers, _) in enumerate(results):
            replica, stage = divmod(rank, pp)
            neighbours = {rank - 1} if stage > 0 else set()
            neighbours |= {rank + 1} if stage < pp - 1 else set()
            if not set(peers) <= neighbours:
                fail(
                    f"{what}: rank {rank} (replica {replica}, stage {stage}) sent to or received "
                    f"from ranks {peers}; its stage's neighbours in its own replica are {sorted(neighbours)}."
                )
            if read and stage == 0 and shares.setdefault(replica, read) != read:
                fail(f"{what}: ranks of replica {replica} read different rows.")
            if stage == 0 and len(read) != rows // dp:
                fail(
                    f"{what}: rank {rank}, the first stage of replica {replica}, read {len(read)} "
                    f"of the {rows} rows; each replica reads its own {rows // dp}."
                )
            shares.setdefault(replica, read)
            dp_group = tuple(range(stage, dp * pp, pp))
            for call, group, _ in calls:
                if group != dp_group and len(group) > 1:
                    fail(
                        f"{what}: rank {rank} ran {_article(call)} on ranks {list(group)}; its gradients "
                        "are averaged with the same stage's in the other replicas, ranks "
                        f"{list(dp_group)}."
                    )
            expected = own(stage, full)
            averaged_over_world = own(stage, world_average)
            mistakes = {
                "the gradients were averaged over the world size, not over the replicas": averaged_over_world
            }
            for other in range(pp):
                if other != stage:
                    mistakes[f"rank {rank} trained the layers of stage {other}; its stage is {stage}"] = own(
                        other, full
                    )
            if misplaced:
                fail(misplaced)
            mistake = _params_mistake(f"{what}, rank {rank}", params, expected, mistakes)
            if mistake is not None:
                fail(
                    f"{what}, rank {rank}: its stage's parameters are not those of one process on the whole "
                    f"batch{': ' + mistake if mistake else ''}."
                )
        covered = sorted(r for share in shares.values() for r in share)
        if covered != list(range(rows)):
            fail(f"{what}: the replicas' rows should cover the batch once each; they read {covered}.")
