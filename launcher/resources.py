"""Shared memory a rank creates and forgets: removed when the launch ends, as Python does for a script.

At the end of a script, Python's resource tracker (a process of its own) unlinks the
``multiprocessing.shared_memory`` segments and named semaphores the script created and did not
unlink. A rank's tracker would be killed with the rank. So each rank notes what it creates and
removes in a log file of the launch (`track_in_rank`), and the launching process removes what is
left when the launch ends (`remove_leaked`). A file rather than the result pipe: a rank killed a
moment later has still written it, and a finalizer that runs during garbage collection cannot
interleave its note with a result being sent.

Only what a rank *creates* counts: a segment it merely attaches to (one the notebook made, say)
is not the rank's to remove.
"""

from __future__ import annotations

import contextlib
import os
from typing import Any


def track_in_rank(log_path: str, rank: int) -> None:
    """Inside a rank: note the shared memory and semaphores it creates and unlinks in ``log_path``."""
    from multiprocessing import resource_tracker, shared_memory

    log = os.open(log_path, os.O_WRONLY | os.O_APPEND)  # made by the launching process

    def note(action: str, rtype: str, name: str) -> None:
        with contextlib.suppress(OSError):  # one short write: appended whole
            os.write(log, f"{action} {rank} {rtype} {name}\n".encode())

    originals = (
        shared_memory.SharedMemory.__init__,
        resource_tracker.register,
        resource_tracker.unregister,
        resource_tracker.ensure_running,
    )

    def init(self: Any, name: str | None = None, create: bool = False, size: int = 0, **kwargs: Any) -> None:
        originals[0](self, name, create, size, **kwargs)
        if create and kwargs.get("track", True):
            note("created", "shared_memory", self._name)

    def register(name: str, rtype: str) -> None:
        if rtype != "shared_memory":  # segments are noted when created, not when attached to
            note("created", rtype, name)

    def unregister(name: str, rtype: str) -> None:
        note("removed", rtype, name)

    def restore() -> None:  # a process the rank forks is not the rank: leave it plain Python
        (
            shared_memory.SharedMemory.__init__,
            resource_tracker.register,
            resource_tracker.unregister,
            resource_tracker.ensure_running,
        ) = originals

    shared_memory.SharedMemory.__init__ = init
    resource_tracker.register = register
    resource_tracker.unregister = unregister
    resource_tracker.ensure_running = lambda: None  # no tracker process, which would die with the rank
    os.register_at_fork(after_in_child=restore)


def remove_leaked(log_path: str) -> list[str]:
    """Unlink what the ranks' notes in ``log_path`` say they created and did not remove; return a
    message for each one removed."""
    try:
        with open(log_path) as log:
            lines = log.read().splitlines()
    except OSError:
        return []
    left: dict[tuple[str, str], str] = {}  # (type, name) -> rank
    for line in lines:
        parts = line.split(" ", 3)
        if len(parts) != 4:
            continue
        action, rank, rtype, name = parts
        if action == "created":
            left[(rtype, name)] = rank
        else:
            left.pop((rtype, name), None)
    messages = []
    for (rtype, name), rank in sorted(left.items()):
        if _unlink(rtype, name):
            messages.append(
                f"rank {rank} left the {rtype.replace('_', ' ')} {name.lstrip('/')!r} behind; launch "
                "removed it, as Python does at the end of a script. Call .unlink() on shared memory "
                "you create once you are done with it."
            )
    return messages


def _unlink(rtype: str, name: str) -> bool:
    """Unlink a leaked segment or semaphore; False if it was already gone or cannot be."""
    try:
        if rtype == "shared_memory":
            import _posixshmem

            _posixshmem.shm_unlink(name)
        elif rtype == "semaphore":
            import _multiprocessing

            _multiprocessing.sem_unlink(name)
        else:
            return False
    except (OSError, ImportError, AttributeError):
        return False
    return True
