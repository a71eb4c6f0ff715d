"""Each launch's folders: its ranks' file store, their large results, their notes of shared memory.

The main folder is in the temporary directory: the rendezvous must not depend on how full
``/dev/shm`` is. Large results go first to a second folder in ``/dev/shm`` (memory, never a
disk) where there is one, else to the main folder's ``results``. The launching process makes
them all, so that a rank still running after its launch ended cannot make them again.

Each folder holds a ``lock`` file, locked (``flock``) by the launching process for as long as the
launch runs. A folder whose lock can be taken belongs to a process that is gone, killed before it
could remove its folders: the next process that launches removes it. A lock, not a process id,
because ids repeat, and differ between containers that share ``/dev/shm``.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import re
import secrets
import shutil
import tempfile

SHARED_MEMORY = "/dev/shm"
_FOLDER = re.compile(r"launch-\d+-[a-z0-9_]{8}")  # what mkdtemp makes of the prefix
_stale_removed = False


class LaunchFolders:
    """The folders of one launch, made and locked at once; `remove` removes them."""

    def __init__(self) -> None:
        global _stale_removed
        if not _stale_removed:
            _stale_removed = True
            remove_stale_folders()
        self.locks: dict[str, int] = {}  # folder -> its locked lock file
        self.main = self._make(tempfile.gettempdir())
        self.store_path = os.path.join(self.main, "store")
        self.resource_log = os.path.join(self.main, "resources")
        os.close(os.open(self.resource_log, os.O_CREAT | os.O_WRONLY, 0o600))
        spill = os.path.join(self.main, "results")
        os.mkdir(spill, 0o700)
        self.result_folders = [spill]
        if os.path.isdir(SHARED_MEMORY) and os.access(SHARED_MEMORY, os.W_OK):
            with contextlib.suppress(OSError):  # a full /dev/shm: results go to the disk
                self.result_folders.insert(0, self._make(SHARED_MEMORY))

    def _make(self, base: str) -> str:
        # Made under another name and locked before it takes a launch folder's name: another
        # process clearing stale folders must never find one of ours with its lock not yet held.
        making = tempfile.mkdtemp(prefix="launch-new-", dir=base)
        lock = os.open(os.path.join(making, "lock"), os.O_CREAT | os.O_RDWR, 0o600)
        fcntl.flock(lock, fcntl.LOCK_EX)
        while True:
            folder = os.path.join(base, f"launch-{os.getpid()}-{secrets.token_hex(4)}")
            if not os.path.exists(folder):
                os.rename(making, folder)
                break
        self.locks[folder] = lock
        return folder

    def remove(self) -> None:
        """Remove every folder and what is in it (safe to call again if interrupted)."""
        for folder in list(self.locks):
            shutil.rmtree(folder, ignore_errors=True)
            with contextlib.suppress(OSError):
                os.close(self.locks.pop(folder))


def remove_stale_folders() -> None:
    """Remove this user's launch folders that no running launch holds."""
    for base in {SHARED_MEMORY, tempfile.gettempdir()}:
        with contextlib.suppress(OSError):
            for entry in os.scandir(base):
                with contextlib.suppress(OSError):
                    if (
                        _FOLDER.fullmatch(entry.name)
                        and entry.is_dir(follow_symlinks=False)
                        and entry.stat(follow_symlinks=False).st_uid == os.getuid()
                    ):
                        _remove_if_unlocked(entry.path)


def _remove_if_unlocked(folder: str) -> None:
    lock = os.open(os.path.join(folder, "lock"), os.O_RDWR)  # no lock file: not one of ours
    try:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)  # raises if a live launch holds it
        shutil.rmtree(folder, ignore_errors=True)
    finally:
        os.close(lock)
