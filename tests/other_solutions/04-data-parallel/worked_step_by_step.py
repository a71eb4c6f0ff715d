"""Works each answer out from named quantities: the ring's chunks and steps, the NDR card in
bytes per second, backward's time per token, and the bytes per parameter.

replaces: worked
fails: none
"""

gpus_in_node, chunk = 8, 13e9 * 2 / 8
bytes_per_gpu = 2 * (gpus_in_node - 1) * chunk  # 2(p-1) steps, one chunk each
card = 400 / 8 * 1e9
per_ring = 7e9 * 2 / 8
seconds_on_64 = 2 * 63 * (per_ring / 64) / card
backward_seconds_per_token = 4 * 7e9 / (989e12 / 2)
tokens_to_hide_it = seconds_on_64 / backward_seconds_per_token
bytes_per_param = 2 + 2 + 3 * 4
largest_params = 80e9 / bytes_per_param
