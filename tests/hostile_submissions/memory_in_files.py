"""Memory taken as files in /dev/shm and /tmp, which belong to no process.

expect: second fails: memory
"""

import os

for i in range(32):
    for folder in ("/dev/shm", "/tmp"):
        with open(os.path.join(folder, f"fill-{i}"), "wb") as f:
            f.write(bytes(128 * 2**20))
