"""Halves the whole step with two chunks, as if cutting each stage in two made every moment of it
twice as fast, where only the bubble shrinks and the work stays.

replaces: predict_clock
fails: test_predict_clock
says: halve the whole step
"""

gpipe_step_ms = (4 + 4 - 1) * (30 + 60)
interleaved_step_ms = gpipe_step_ms / 2
