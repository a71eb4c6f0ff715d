"""How long `launch` takes to bring large results back, and how much memory that costs.

The work: 4 ranks each fill a 500 MB float32 tensor and return it. Measured, in one run:

- a launch whose ranks make the tensor and return nothing (the cost of making it);
- a launch whose ranks return it (through shared memory: each tensor is copied once into a
  file in /dev/shm, which the launching process maps instead of reading);
- with ``--pipe``, the same through the result pipe, as every result travelled before (each
  rank lowers the size above which tensors go through shared memory, inside its function).

For each: the wall time of the launch (median of the runs), the extra time the results cost,
and the peak of the machine's used memory (MemTotal - MemAvailable, sampled every 5 ms) above
what it was before, against the results' own size; and that no launch file is left behind.

Run it with:  .venv/bin/python benchmarks/result_transfer.py [--pipe]
"""

from __future__ import annotations

import argparse
import glob
import os
import statistics
import tempfile
import threading
import time

import torch

from launcher import launch

WORLD_SIZE = 4
ELEMENTS = 125_000_000  # 500 MB of float32 per rank
TARGET_S = 2.0


def make_and_drop(rank: int, world_size: int) -> None:
    torch.full((ELEMENTS,), float(rank))


def make_and_return(rank: int, world_size: int) -> torch.Tensor:
    return torch.full((ELEMENTS,), float(rank))


def make_and_return_through_the_pipe(rank: int, world_size: int) -> torch.Tensor:
    import launcher.wire

    launcher.wire.SHARED_MIN_BYTES = float("inf")
    return torch.full((ELEMENTS,), float(rank))


def used_memory() -> int:
    with open("/proc/meminfo") as meminfo:
        fields = {line.split(":")[0]: int(line.split()[1]) * 1024 for line in meminfo}
    return fields["MemTotal"] - fields["MemAvailable"]


class PeakMemory:
    """The peak of the machine's used memory while inside ``with``, above its level before."""

    def __enter__(self) -> PeakMemory:
        self.before = self.peak = used_memory()
        self.running = True
        self.thread = threading.Thread(target=self._sample)
        self.thread.start()
        return self

    def _sample(self) -> None:
        while self.running:
            self.peak = max(self.peak, used_memory())
            time.sleep(0.005)

    def __exit__(self, *exc: object) -> None:
        self.running = False
        self.thread.join()

    @property
    def extra(self) -> int:
        return self.peak - self.before


def measure(fn, runs: int) -> tuple[float, int]:
    times, peaks = [], []
    for _ in range(runs):
        with PeakMemory() as memory:
            start = time.perf_counter()
            results = launch(fn, WORLD_SIZE, timeout=120)
            times.append(time.perf_counter() - start)
            if results[0] is not None:
                assert [r.shape[0] for r in results] == [ELEMENTS] * WORLD_SIZE
                assert [r[-1].item() for r in results] == list(range(WORLD_SIZE))
            del results
        peaks.append(memory.extra)
    return statistics.median(times), max(peaks)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--runs", type=int, default=3, help="launches of each kind")
    parser.add_argument("--pipe", action="store_true", help="also time the results through the pipe")
    options = parser.parse_args()

    size = WORLD_SIZE * ELEMENTS * 4
    launch(make_and_drop, WORLD_SIZE)  # start the fork server
    rows = [("make the tensors, return nothing", *measure(make_and_drop, options.runs))]
    rows.append(("return them (shared memory)", *measure(make_and_return, options.runs)))
    if options.pipe:
        rows.append(("return them (the pipe, as before)", *measure(make_and_return_through_the_pipe, 1)))

    print(f"machine: {os.cpu_count()} CPU cores; torch {torch.__version__}")
    print(f"work: {WORLD_SIZE} ranks each return {ELEMENTS * 4 / 1e6:.0f} MB ({size / 1e9:.1f} GB in all)\n")
    print(f"{'':38}{'launch':>10}{'results cost':>14}{'peak memory':>14}")
    base = rows[0][1]
    for name, seconds, peak in rows:
        cost = "" if seconds is base else f"{seconds - base:.2f} s"
        print(f"{name:38}{seconds:>8.2f} s{cost:>14}{peak / size:>11.1f} x results")
    leftovers = [
        p for base in ("/dev/shm", tempfile.gettempdir()) for p in glob.glob(f"{base}/launch-{os.getpid()}-*")
    ]
    print(f"\nlaunch folders left in /dev/shm and {tempfile.gettempdir()}: {len(leftovers)}")
    verdict = "met" if rows[1][1] <= TARGET_S else "MISSED"
    print(f"target: returning {size / 1e9:.0f} GB takes at most {TARGET_S:.0f} s: {verdict}")


if __name__ == "__main__":
    main()
