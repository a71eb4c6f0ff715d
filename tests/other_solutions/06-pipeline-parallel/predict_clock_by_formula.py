"""From the bubble formulas: the step is the work over the share of it that is not bubble.

replaces: predict_clock
fails: none
"""

work = 4 * (30 + 60)
gpipe_step_ms = work / (1 - bubble_fraction(4, 4))  # noqa: F821 - the notebook's
interleaved_step_ms = work / (1 - interleaved_bubble(4, 2, 4))  # noqa: F821 - the notebook's
