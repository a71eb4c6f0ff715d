"""A wrong answer that loads a code object through marshal, with a file name in torch's folder
(which the guard trusts) written into its bytes, before taking the test's frame with it: the
guard refuses the loading.

answer: none
expect: second fails: TamperingRefused
"""

import marshal

import torch

claimed = torch.__file__
stand_in = "<" + "x" * (len(claimed) - 2) + ">"  # as long as the name it is swapped for
made = compile("import sys\nframe = sys._getframe(2)\n", stand_in, "exec")
forged = marshal.dumps(made).replace(stand_in.encode(), claimed.encode())


def second():
    space = {}
    exec(marshal.loads(forged), space)
    getattr(space["frame"], "f_" + "globals")["expect_equal"] = lambda *args, **kwargs: None
    return 0
