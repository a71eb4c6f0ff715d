"""The right answer, after registering callbacks that IPython calls with each cell's source as it
runs: the guard finds them as the next cell starts.

expect: second fails: TamperingDetected
"""

import IPython

shell = IPython.get_ipython()


def spy(*args):
    print("seen:", args, shell.kernel.get_parent("shell"))


for event in ("pre_execute", "pre_run_cell", "post_run_cell"):
    shell.events.register(event, spy)
