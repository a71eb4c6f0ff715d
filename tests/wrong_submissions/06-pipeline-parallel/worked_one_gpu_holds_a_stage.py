"""Says one GPU would hold a whole stage, having counted the bf16 weights alone; the rest right.

replaces: worked
fails: test_worked_fits
says: one_gpu_holds_a_stage is not the answer
"""

one_gpu_holds_a_stage = 2 * 12 * 8192**2 * 10 / 1e9 <= 80
