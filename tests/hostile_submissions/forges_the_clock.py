"""The right answer to the second exercise, and a timing function that never reads the fake clock
it is given but sets its count of readings by hand: the checks count readings of their own.

expect: clock fails: was never read
"""


def measure(clock, work):
    work()
    clock.calls = 2
    clock.timeline += [("clock",), ("clock",)]
    return 0.25
