"""How long `launch` takes, next to `torch.multiprocessing.spawn` doing the same work.

The work: a 4-rank Gloo all_reduce of 4 floats (the lecture's ``[0, 1, 2, 3] + rank``), checked
to give ``[6, 10, 14, 18]`` on every rank. Measured, in one run of this script:

- the first `launch` in this fresh process (it starts the fork server, which imports torch);
- the median of 20 warm launches, with torch's collective checks on (the default) and off;
- ``torch.multiprocessing.spawn`` of the same function, rendezvous through the same kind of
  store (a file), a few times (each run starts 4 fresh interpreters).

Run it with:  .venv/bin/python benchmarks/launch_latency.py
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import tempfile
import time

T_IMPORT = time.perf_counter()
import torch  # noqa: E402 - timed on purpose
import torch.distributed as dist  # noqa: E402
import torch.multiprocessing as mp  # noqa: E402

IMPORT_S = time.perf_counter() - T_IMPORT

from launcher import launch  # noqa: E402

WORLD_SIZE = 4
EXPECTED = [6.0, 10.0, 14.0, 18.0]
TARGETS = {"warm_median_ms": 150.0, "speedup": 25.0, "first_launch_s": 6.0}


def all_reduce_demo(rank: int, world_size: int) -> list[float]:
    t = torch.tensor([0.0, 1, 2, 3]) + rank
    dist.all_reduce(t)
    return t.tolist()


def timed_launch(check_collectives: bool) -> float:
    start = time.perf_counter()
    results = launch(all_reduce_demo, WORLD_SIZE, check_collectives=check_collectives)
    elapsed = time.perf_counter() - start
    assert results == [EXPECTED] * WORLD_SIZE, results
    return elapsed


def _spawned_rank(rank: int, world_size: int, store_path: str, results: dict) -> None:
    dist.init_process_group("gloo", init_method=f"file://{store_path}", rank=rank, world_size=world_size)
    results[rank] = all_reduce_demo(rank, world_size)
    dist.destroy_process_group()


def timed_spawn() -> float:
    with tempfile.TemporaryDirectory() as tmp, mp.Manager() as manager:
        results = manager.dict()
        start = time.perf_counter()
        mp.spawn(_spawned_rank, args=(WORLD_SIZE, os.path.join(tmp, "store"), results), nprocs=WORLD_SIZE)
        elapsed = time.perf_counter() - start
        assert [results[r] for r in range(WORLD_SIZE)] == [EXPECTED] * WORLD_SIZE
    return elapsed


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--warm", type=int, default=20, help="warm launches to take the median of")
    parser.add_argument("--spawns", type=int, default=5, help="torch.multiprocessing.spawn runs")
    options = parser.parse_args()

    first = timed_launch(check_collectives=True)
    warm = [timed_launch(check_collectives=True) for _ in range(options.warm)]
    unchecked = [timed_launch(check_collectives=False) for _ in range(options.warm)]
    spawned = [timed_spawn() for _ in range(options.spawns)]

    warm_ms = 1000 * statistics.median(warm)
    speedup = statistics.median(spawned) / statistics.median(warm)
    print(f"machine: {os.cpu_count()} CPU cores, {platform.platform()}, Python {platform.python_version()}")
    print(f"torch {torch.__version__}; `import torch` in this process took {IMPORT_S:.2f} s")
    print(f"work: {WORLD_SIZE}-rank Gloo all_reduce of 4 floats\n")
    print(f"{'':44}{'median':>10}{'min':>10}{'max':>10}")
    _row("launch, first in this process (1 run)", [first], "s")
    _row(f"launch, warm ({options.warm} runs)", warm, "ms")
    _row(f"launch, warm, check_collectives=False ({options.warm})", unchecked, "ms")
    _row(f"torch.multiprocessing.spawn ({options.spawns} runs)", spawned, "s")
    print(f"\nspeed-up of a warm launch over spawn: {speedup:.0f}x")
    checks = [
        (f"warm median <= {TARGETS['warm_median_ms']:.0f} ms", warm_ms <= TARGETS["warm_median_ms"]),
        (f"speed-up >= {TARGETS['speedup']:.0f}x", speedup >= TARGETS["speedup"]),
        (f"first launch <= {TARGETS['first_launch_s']:.0f} s", first <= TARGETS["first_launch_s"]),
    ]
    for name, ok in checks:
        print(f"target {name}: {'met' if ok else 'MISSED'}")


def _row(name: str, samples: list[float], unit: str) -> None:
    scale = 1000 if unit == "ms" else 1
    values = [statistics.median(samples), min(samples), max(samples)]
    print(f"{name:44}" + "".join(f"{scale * v:>8.{0 if unit == 'ms' else 2}f} {unit}" for v in values))


if __name__ == "__main__":
    main()
