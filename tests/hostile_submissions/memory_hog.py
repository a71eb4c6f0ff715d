"""A memory hog: 256 MiB at a time, each page written, far past the sandbox's cap.

expect: second fails: memory
"""

hog = []
for _ in range(64):
    hog.append(bytearray(256 * 2**20))
