"""Each launch's folder: its ranks' file store and large results, removed when it ends.

The folder is in shared memory where there is some, so that results are never written to a
disk; results too large for it go to a second folder in the temporary directory, which a rank
makes only if it needs it. Both names carry the launching process's id, so that the folders of
a process killed before it could remove them are found, and removed, by the next.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import tempfile

SHARED_MEMORY = "/dev/shm"
_FOLDER = re.compile(r"launch-(\d+)-\w+(-spill)?")
_stale_removed = False


def launch_folders() -> tuple[str, list[str]]:
    """A new folder for one launch, and the folders, first choice first, where its ranks put
    large results (the first inside it). The first call in a process removes stale folders."""
    global _stale_removed
    if not _stale_removed:
        _stale_removed = True
        remove_stale_folders()
    temporary = tempfile.gettempdir()
    shared = os.path.isdir(SHARED_MEMORY) and os.access(SHARED_MEMORY, os.W_OK)
    folder = tempfile.mkdtemp(prefix=f"launch-{os.getpid()}-", dir=SHARED_MEMORY if shared else temporary)
    results = [os.path.join(folder, "results")]
    if shared:
        results.append(os.path.join(temporary, os.path.basename(folder) + "-spill"))
    return folder, results


def remove_stale_folders() -> None:
    """Remove launch folders of this user's processes that no longer exist."""
    for base in {SHARED_MEMORY, tempfile.gettempdir()}:
        with contextlib.suppress(OSError):
            for entry in os.scandir(base):
                found = _FOLDER.fullmatch(entry.name)
                with contextlib.suppress(OSError):
                    if (
                        found
                        and entry.is_dir(follow_symlinks=False)
                        and entry.stat(follow_symlinks=False).st_uid == os.getuid()
                        and not _process_exists(int(found[1]))
                    ):
                        shutil.rmtree(entry.path, ignore_errors=True)


def _process_exists(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's
        return True
    return True
