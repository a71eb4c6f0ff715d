"""Gives a B the weights' time and a W the input's: right only where the two are equal.

replaces: zero_bubble
fails: test_zero_bubble
says: it lasts
"""


def simulate_zero_bubble(orders, num_chunks, forward=1, backward_input=1, backward_weight=1):
    num_devices = len(orders)
    last = num_devices - 1
    duration = {"F": forward, "B": backward_weight, "W": backward_input}

    def needs(device, kind, i, chunk):
        if kind == "F":
            if device > 0:
                return [(device - 1, "F", i, chunk)]
            return [(last, "F", i, chunk - 1)] if chunk > 0 else []
        if kind == "W":
            return [(device, "B", i, chunk)]
        if device < last:
            return [(device + 1, "B", i, chunk)]
        return [(0, "B", i, chunk + 1)] if chunk < num_chunks - 1 else [(device, "F", i, chunk)]

    times, done, free = {}, [0] * num_devices, [0.0] * num_devices
    while any(done[d] < len(orders[d]) for d in range(num_devices)):
        placed = False
        for d in range(num_devices):
            if done[d] == len(orders[d]):
                continue
            kind, i, chunk = orders[d][done[d]]
            waits = needs(d, kind, i, chunk)
            if all(w in times for w in waits):
                start = max([free[d]] + [times[w][1] for w in waits])
                free[d] = start + duration[kind]
                times[(d, kind, i, chunk)] = (start, free[d])
                done[d], placed = done[d] + 1, True
        if not placed:
            raise ValueError("these orders wait on each other forever")
    return times
