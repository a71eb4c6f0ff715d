"""The bubble of the same pipeline without interleaving, (p - 1) / (m + p - 1), whatever v.

replaces: interleaved_bubble
fails: test_interleaved_bubble
says: leave out the chunks
"""


def interleaved_bubble(p, v, m):
    return (p - 1) / (m + p - 1)
