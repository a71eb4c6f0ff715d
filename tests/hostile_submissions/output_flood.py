"""An output flood: tens of megabytes printed, then the right answer.

expect: full
"""

import os

line = "flood " * 20 + "\n"
for _ in range(150_000):
    print(line, end="")
os.write(1, line.encode() * 20_000)  # below Python, straight to the file descriptor
