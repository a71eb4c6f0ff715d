"""Fits the reference planner's constants on the published runs, and prints its error on each.

The runs (autograder/combined_parallelism/published.py): Narayanan et al. 2021, arXiv 2104.04473,
Table 1 (ten runs on A100s) and Llama 3, arXiv 2407.21783, Table 4 (three on H100s). The step time
each implies is the paper's FLOP count divided by its GPUs and its reported FLOP/s per GPU.

Fitted, by the least squares of the log error over a grid: the fraction of peak matmuls reach on
each GPU (planner.EFFICIENCY), the fraction of a link's bandwidth a ring reaches
(LINK_EFFICIENCY), and how many times a layer's saved activations move through memory
(MEMORY_PASSES); Llama 3's number of virtual stages, which its paper does not state, is chosen the
same way among 1, 2, 4 and 8. The planner's constants are then compared with the fit.

Run it with:  .venv/bin/python benchmarks/planner_calibration.py
"""

from __future__ import annotations

import itertools
import math
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from autograder.combined_parallelism import planner, published  # noqa: E402


def errors(runs: list[dict], **constants: float) -> list[float]:
    """predicted / reported - 1 for each run, with these constants in place of the planner's."""
    out = []
    for run in runs:
        spec = dict(run["spec"])
        if "virtual_stages" in constants and spec["peak_flops"] > 500e12:
            spec["virtual_stages"] = constants["virtual_stages"]
        spec["efficiency"] = constants["a100" if spec["peak_flops"] < 500e12 else "h100"]
        spec["link_efficiency"] = constants["link"]
        spec["memory_passes"] = constants["passes"]
        out.append(planner.predict(spec)["step_seconds"] / run["seconds"] - 1)
    return out


def fit(runs: list[dict]) -> dict[str, float]:
    """The grid's best constants. The A100 runs depend on the A100's efficiency and the two shared
    constants, the H100 runs on the H100's, the shared ones and V: so for each pair of shared
    constants, each GPU's own are searched apart."""
    a100 = [run for run in runs if run["spec"]["peak_flops"] < 500e12]
    h100 = [run for run in runs if run["spec"]["peak_flops"] >= 500e12]
    efficiencies = [x / 100 for x in range(40, 91, 2)]
    best, best_loss = {}, math.inf
    for link in [0.6, 0.65, 0.7, 0.75, 0.8, 0.85, 0.9]:
        for passes in range(0, 13):
            shared = {"link": link, "passes": passes}
            a = min(efficiencies, key=lambda e: _loss(a100, {**shared, "a100": e, "h100": e}))
            h, v = min(
                itertools.product(efficiencies, [1, 2, 4, 8]),
                key=lambda ev: _loss(h100, {**shared, "a100": ev[0], "h100": ev[0], "virtual_stages": ev[1]}),
            )
            constants = {"a100": a, "h100": h, **shared, "virtual_stages": v}
            loss = _loss(runs, constants)
            if loss < best_loss:
                best, best_loss = constants, loss
    return best


def _loss(runs: list[dict], constants: dict[str, float]) -> float:
    return sum(math.log1p(e) ** 2 for e in errors(runs, **constants))


def planner_constants() -> dict[str, float]:
    return {
        "a100": planner.EFFICIENCY["A100"],
        "h100": planner.EFFICIENCY["H100"],
        "link": planner.LINK_EFFICIENCY,
        "passes": planner.MEMORY_PASSES,
        "virtual_stages": published.LLAMA3_VIRTUAL_STAGES,
    }


def report(runs: list[dict], constants: dict[str, float]) -> None:
    errs = errors(runs, **constants)
    for run, error in zip(runs, errs, strict=True):
        predicted = (1 + error) * run["seconds"]
        print(
            f"  {run['name']:45} {run['seconds']:7.2f} s reported, {predicted:7.2f} predicted, {error:+6.1%}"
        )
    print(f"  median |error| {statistics.median(map(abs, errs)):.1%}, largest {max(map(abs, errs)):.1%}")


def main() -> None:
    runs = published.calibration_runs()
    print("The planner's constants:", planner_constants())
    report(runs, planner_constants())
    best = fit(runs)
    print("Fitted now:", best)
    report(runs, best)
    if best != planner_constants():
        print("The fit differs from the planner's constants: update planner.py and published.py.")


if __name__ == "__main__":
    main()
