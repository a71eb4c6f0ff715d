"""Predicts the work alone, 4 micro-batches of 30 + 60 ms, for both steps: no stage ever waits.

replaces: predict_clock
fails: test_predict_clock
says: leave out the bubble
"""

gpipe_step_ms = 4 * (30 + 60)
interleaved_step_ms = 4 * (30 + 60) - 1
