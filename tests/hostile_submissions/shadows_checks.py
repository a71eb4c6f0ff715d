"""A wrong answer, handed in with a package beside the notebook that shadows the course's
checks with ones that pass anything.

beside: autograder/__init__.py autograder/checks.py
answer: wrong
expect: second fails: second()
"""
