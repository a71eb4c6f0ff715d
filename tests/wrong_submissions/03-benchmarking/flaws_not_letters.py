"""Describes the flaws in words where the statement asks for letters.

replaces: lecture
fails: test_lecture_flaws
says: is not one of the statements' letters
"""

benchmark_flaws = {"synchronises every call", "no barrier before the clock"}
