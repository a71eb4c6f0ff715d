"""06's measure of activation checkpointing counts the layer outputs still alive after the forward
pass. It collects garbage only among what it made itself (everything else is set aside with
``gc.freeze`` meanwhile: a collection of all a kernel holds takes a tenth of a second or more, once
per measured case), and leaves the collector as it found it, in a kernel and in a rank."""

from __future__ import annotations

import gc

import torch

from autograder.pipeline_parallel.costs import measure_checkpointing


def run_plainly(layers, x, segments):
    return layers(x)


def outputs_only_a_cycle_keeps(layers, x, segments):
    """Runs the layers without a graph, each output held only by a reference cycle: garbage, which a
    collection among what the measure made must find."""
    for layer in layers:
        with torch.no_grad():
            x = layer(x)
        cycle = [x]
        cycle.append(cycle)
    return layers[-1](x.detach())


def test_the_measure_collects_what_it_made_and_leaves_the_collector_as_it_was() -> None:
    assert gc.get_freeze_count() == 0
    assert measure_checkpointing(run_plainly, 4, 2) == (4, 0)  # every output kept; none run again
    assert measure_checkpointing(outputs_only_a_cycle_keeps, 4, 2)[0] == 1  # the cycles were collected
    assert gc.get_freeze_count() == 0  # nothing left set aside


def test_in_a_process_that_set_objects_aside_they_stay_aside() -> None:
    # (A rank: its fork server froze what it held, so that no collection touches those pages.)
    gc.freeze()
    try:
        frozen = gc.get_freeze_count()
        assert measure_checkpointing(run_plainly, 3, 3) == (3, 0)
        assert gc.get_freeze_count() >= frozen
    finally:
        gc.unfreeze()
