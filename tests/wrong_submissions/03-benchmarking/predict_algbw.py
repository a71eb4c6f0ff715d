"""Predicts algbw where the statement asks for busbw.

replaces: alpha_beta
fails: test_alpha_beta test_alpha_beta_more
says: predict algbw, not busbw
"""


def predict_busbw(name: str, size_bytes: int, world_size: int, alpha: float, beta: float) -> float:
    return size_bytes / (alpha + size_bytes / beta) / 1e9
