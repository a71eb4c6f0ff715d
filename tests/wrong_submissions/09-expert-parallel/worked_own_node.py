"""The token's own node counted among the 8 it could cross to.

replaces: worked
fails: test_worked_ib_saving
says: count the token's own node
"""

ib_saving = 8 / 4
