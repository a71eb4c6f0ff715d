"""The right answer after what honest students use: prints, a warning, logging, a magic timing a
line, a shell escape and progress bars (tqdm's, in the notebook and as text, and a widget's).
It keeps every point.

expect: full
"""

import logging
import sys
import warnings

import ipywidgets
import tqdm
import tqdm.auto

logging.basicConfig(level=logging.INFO)
logging.getLogger("student").info("starting")
warnings.warn("this is only a warning", stacklevel=1)
get_ipython().run_line_magic("time", "total = sum(range(1000))")
get_ipython().system("echo from the shell")
bar = ipywidgets.IntProgress(max=3)
for step in range(3):
    bar.value = step + 1
    sys.stdout.write(f"\rstep {step + 1}/3")
print()
for _ in tqdm.auto.tqdm(range(3), desc="in the notebook"):
    pass
for _ in tqdm.tqdm(range(3), desc="as text"):
    pass
