"""What a check records inside a rank: every operation, with the dtype of each tensor it carried
and whether that tensor would be on the GPU (`standin`), and the fake clock's readings."""

from __future__ import annotations

import torch

from ..checks import Timeline, tensors_in
from .standin import StandInGpu

# Operations a collective call may dispatch besides the collective itself: views of its tensors,
# and the copies Gloo makes into its outputs. Anything else inside a timed call is extra work.
VIEWS_AND_COPIES = frozenset(
    {"alias", "as_strided", "chunk", "copy_", "detach", "expand", "narrow", "reshape", "select", "slice"}
    | {"split", "split_with_sizes", "squeeze", "t", "transpose", "unbind", "unsqueeze", "_unsafe_view"}
    | {"view"}
)


class DeviceTimeline(Timeline):
    """A `Timeline` whose operation events also carry, as their last item, one ``(dtype, on_gpu)``
    pair for each tensor argument that holds elements."""

    def __init__(self, gpu: StandInGpu) -> None:
        super().__init__()
        self.gpu = gpu

    def _more(self, args: tuple) -> tuple:
        return ([(t.dtype, self.gpu.on_gpu(t)) for a in args for t in tensors_in(a) if t.numel()],)


def is_collective(event: tuple) -> bool:
    return event[0] == "op" and event[1] == "c10d"


def off_the_gpu(event: tuple) -> bool:
    """Whether a collective carried a tensor that would not be on the GPU."""
    return event[0] == "op" and len(event) > 5 and not all(on_gpu for _, on_gpu in event[5])


def dtypes(event: tuple) -> list[torch.dtype]:
    return [dtype for dtype, _ in event[5]] if len(event) > 5 else []
