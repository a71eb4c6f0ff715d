"""The FP8 saving computed without the scales.

replaces: worked
fails: test_worked_fp8
says: leave out the scales
"""

fp8_saving = 0.25
