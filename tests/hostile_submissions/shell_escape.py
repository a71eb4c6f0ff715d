"""The right answer after two shell escapes, as IPython runs ``!echo`` and ``files = !ls``: an
honest student's, which keeps every point.

expect: full
"""

get_ipython().system("echo listing the folder")
files = get_ipython().getoutput("ls")
