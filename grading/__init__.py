"""The instructors' side of the course: releasing it, handing it out, and grading it with nbgrader.

Students never import this package, and the student distribution does not hold it. It runs the
course's notebooks (in kernels that import ``autograder``, ``launcher`` and ``visuals``) but
imports none of them itself; they never import it (tests/test_repository.py checks both).

- ``nbgrader_config``: the course's nbgrader configuration (the repository root's
  nbgrader_config.py loads it).
- ``release``: ``make release``, the student release notebooks/ made from solutions/.
- ``distribution``: ``make distribution``, what a graded class's students receive.
- Grading one submission, as ``nbgrader autograde`` does it with the course's configuration:
  ``preflight`` (before the first submission: can a kernel started as submissions' are import
  the course?), ``execute`` (nbgrader's Execute preprocessor, with a time budget per notebook),
  ``sandbox`` (bubblewrap around each kernel, and the kernel managers), ``watchdog`` (the
  sandbox's caps on tasks and memory), ``spare_kernel`` (the next kernel started ahead),
  ``demos`` (the cells that only show something, left out),
  ``kernel_client`` (a client that never misses a kernel's reply), ``ungraded`` (outcomes that
  are the grader's fault, not a grade), ``preprocessors`` (stderr is no failure, tampering is
  flagged, feedback hides the hidden tests).
- ``grade_class``: ``make grade``, a whole class in parallel, resumable, with a summary.
"""
