"""f_i is taken from the probabilities, like P_i.

replaces: balance
fails: test_balance test_balance_more
says: take f_i from the probabilities
"""


def balance_loss(logits, experts, alpha):
    n = logits.shape[1]
    f = logits.softmax(-1).mean(0)
    p = logits.softmax(-1).mean(0)
    return alpha * n * (f * p).sum()
