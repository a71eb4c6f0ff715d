"""Finds the warm-up by walking the slots: where micro-batch 0's forward on the last virtual
stage falls, then its gradient stepping back GPU by GPU; the steps from the groups of
interleaved_order, split into its forwards and its backwards.

replaces: interleaved_1f1b
fails: none
"""


def interleaved_1f1b(num_devices, device, num_microbatches, num_chunks):
    p, v, m = num_devices, num_chunks, num_microbatches
    steps = interleaved_order(p, device, m, v)  # noqa: F821 - the notebook's
    forwards = [s for s in steps if s[0] == "F"]
    backwards = [s for s in steps if s[0] == "B"]
    # GPU g runs its k-th forward in slot g + k; micro-batch 0 enters chunk v - 1 at forward (v - 1) p.
    slot = (p - 1) + (v - 1) * p  # its forward on the last virtual stage
    slot += 1  # its backward there
    gpu = p - 1
    while gpu > device:  # the gradient comes back a GPU a slot
        slot += 1
        gpu -= 1
    warm_up = min(slot - device, len(forwards))
    order = list(forwards[:warm_up])
    rest = forwards[warm_up:]
    for k, backward in enumerate(backwards):
        order.append(backward)
        if k < len(rest):
            order.append(rest[k])
    return order
