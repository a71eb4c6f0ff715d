"""A wrong answer whose function is made by ``exec`` from a string, so that the frame-taking code is
in no notebook cell's file: the guard refuses it to code made from a string too.

answer: none
expect: second fails: TamperingRefused
"""

space = {}
exec(
    "import sys\n"
    "def second():\n"
    "    sys._getframe(1).f_globals['expect_equal'] = lambda *args, **kwargs: None\n"
    "    return 0\n",
    space,
)
second = space["second"]
