"""Gives itself full marks and a classmate zero in the gradebook, then overwrites it.

expect: full
"""

import sqlite3

try:
    db = sqlite3.connect(f"{COURSE}/gradebook.db")
    db.execute("UPDATE grade SET auto_score = 0")
    db.commit()
except Exception:
    pass
try:
    with open(f"{COURSE}/gradebook.db", "r+b") as f:
        f.write(b"\0" * 4096)
except OSError:
    pass
