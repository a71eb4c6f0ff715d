"""An answer that never returns, though it stops when interrupted: every test that calls it
hangs until its cell's time limit, and the notebook's time budget stops the rest.

answer: none
expect: second fails: time budget
"""


def second():
    while True:
        pass
