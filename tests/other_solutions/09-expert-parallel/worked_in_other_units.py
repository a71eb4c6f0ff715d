"""The worked answers computed in other units and orders.

replaces: worked
fails: none
"""

value_bytes = 1 + 1 / 32
dispatch_bytes = float(7168 * 8) * value_bytes
ib_saving = 1.75
ib_seconds = (4096 * 4 * 7168 * (value_bytes + 2)) / (400e9 / 8)
fp8_saving = (4 - value_bytes - 2) / 4
expert_state_bytes = 4 * 5 * 44040192 * 10.0
