"""Notebook 06's check of the lecture's forward pipeline: each rank's stage runs every
micro-batch in order and passes it on, sending each before the next forward; what was sent, what
ran, and the last rank's output are compared with the whole model assembled here."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import torch

from ..checks import counted, fail, private_generator, run_ranks
from ..comm import CommLog
from .schedules import _expect, _messages, _microbatches, _no_collectives, _rows_run, _steps_and_messages
from .stage import DIM, stages_from, traced_stage


def microbatch_rows(batch: int, microbatch: int) -> list[int]:
    """The rows of each micro-batch when ``batch`` rows are cut into pieces of ``microbatch``."""
    return [min(microbatch, batch - start) for start in range(0, batch, microbatch)]


def _forward_on_rank(rank: int, world_size: int, fn: Callable, batch: int, microbatch: int) -> tuple:
    mine = private_generator()
    stage, journal, rows, _ = traced_stage(mine)
    inputs = torch.randn(batch, DIM, generator=mine) if rank == 0 else None
    with torch.no_grad(), CommLog(count_collectives=False, keep_sent=True) as log:
        out = fn(stage, None if inputs is None else inputs.clone(), batch, microbatch)
    return out, log.summary(), stage.layers.state_dict(), inputs, list(journal), rows


def check_pipeline_forward(
    fn: Callable, world_sizes: Sequence[int] = (2,), batch: int = 10, microbatch: int = 4
) -> None:
    """Check ``fn(stage, inputs, batch_size, microbatch_size)``: the lecture's forward pipeline.
    Rank 0 has the batch; every stage runs each micro-batch (the last one smaller when the batch
    does not divide) and passes it on; the last rank returns the whole batch's output, the others
    None."""
    __tracebackhide__ = True
    rows = microbatch_rows(batch, microbatch)
    for world_size in world_sizes:
        ranks = counted(world_size, "rank")
        what = f"the forward pipeline on {ranks}, batch {batch} in micro-batches of {microbatch}"
        per_rank = run_ranks(_forward_on_rank, world_size, fn, batch, microbatch, what="the forward pipeline")
        stages = stages_from([got[2] for got in per_rank])
        activations = [per_rank[0][3]]  # what enters each stage, and what leaves the last
        with torch.no_grad():
            for stage in stages:
                activations.append(stage(activations[-1]))
        starts = [sum(rows[:k]) for k in range(len(rows))]
        for rank, (out, summary, _, _, journal, rows_run) in enumerate(per_rank):
            where = f"{what}: rank {rank}"
            _no_collectives(where, summary)
            forwards = [i for kind, i, _ in journal if kind == "F"]
            if len(forwards) != len(rows):
                fail(
                    f"{where} ran its stage {counted(len(forwards), 'time')}; the batch makes "
                    f"{_microbatches(len(rows))} ({rows} rows), each run through every stage once."
                )
            _rows_run(where, rows_run, rows)
            want_sends = [(rank + 1, n * DIM) for n in rows] if rank < world_size - 1 else []
            want_recvs = [(rank - 1, n * DIM) for n in rows] if rank > 0 else []
            # Only rank - 1 sends to a rank here: a receive from any source is as good.
            recvs = [(rank - 1 if peer is None else peer, n) for peer, n in summary["recvs"]]
            for direction, got, want in (
                ("sent", summary["sends"], want_sends),
                ("received", recvs, want_recvs),
            ):
                if got != want:
                    fail(
                        f"{where} {direction} {_messages(got)}; expected {_messages(want)}: one message per "
                        f"micro-batch of {rows} rows x {DIM} features."
                    )
            _steps_and_messages(where, journal, summary["messages"], rank, world_size)
            for k, sent in enumerate(summary["sent"]):
                piece = activations[rank + 1][starts[k] : starts[k] + rows[k]]
                _expect(f"{where}: what it sent for micro-batch {k} (its stage's output)", sent, piece)
            if rank < world_size - 1:
                if out is not None:
                    fail(f"{where} returned {out!r:.60}: only the last stage has the output; return None.")
                continue
            _expect(f"{where}'s output (the whole batch, micro-batches in order)", out, activations[-1])
