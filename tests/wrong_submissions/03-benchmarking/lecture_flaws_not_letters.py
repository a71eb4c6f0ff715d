"""Describes the flaws in words where the statement asks for letters.

replaces: lecture
fails: test_lecture_flaws
says: is not one of the statements' letters
"""

lecture_flaws = {"one timed call", "barrier inside the window"}
