"""Cuts every tensor into 4 chunks, whatever the number of ranks: right on 4 ranks only.

replaces: predict
fails: test_predict_rooted test_predict_all
says: cut into 4 chunks whatever the number of ranks
"""


def after_scatter(inputs: list, src: int) -> list:
    return [chunk.clone() for chunk in inputs[src].chunk(4)][: len(inputs)]


def after_reduce_scatter(inputs: list) -> list:
    total = sum(inputs[1:], inputs[0].clone())
    return [chunk.clone() for chunk in total.chunk(4)][: len(inputs)]


def after_all_to_all(inputs: list) -> list:
    import torch

    return [torch.cat([x.chunk(4)[rank] for x in inputs]) for rank in range(len(inputs))]
