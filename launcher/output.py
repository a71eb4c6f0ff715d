"""The ranks' output, relayed into the cell that called `launch`, each line prefixed with its rank."""

from __future__ import annotations

import re
import sys


class OutputPrinter:
    """Relays the ranks' output as it comes, each line prefixed with its rank.

    A line goes out as soon as it ends, with ``\n``, or with ``\r`` as a progress line that
    rewrites itself does (each rewrite keeps the prefix). Text after the last line end waits for
    its end, so that ranks' lines never mix mid-line; a progress bar that starts each rewrite
    with ``\r`` (tqdm does) therefore shows each state when the next one begins.
    """

    _LINE_END = re.compile(r"(\r\n|\n|\r)")
    # What Gloo itself prints as a process group connects, in older torch (2.8, Colab's in 2025):
    # a line per rank at every launch, news to nobody, burying what the ranks print.
    _NOISE = re.compile(r"\[Gloo\] Rank \d+ is connected to \d+ peer ranks\. .*")

    def __init__(self) -> None:
        self.partial: dict[tuple[int, str], bytes] = {}

    def feed(self, rank: int, stream: str, data: bytes) -> None:
        text = self.partial.get((rank, stream), b"") + data
        # ASCII line ends are never inside a UTF-8 character. A last \r waits: it may be the
        # first half of \r\n.
        cut = max(text.rfind(b"\n"), text.rfind(b"\r", 0, len(text) - 1)) + 1
        self.partial[(rank, stream)] = text[cut:]
        if cut:
            pieces = self._LINE_END.split(text[:cut].decode("utf-8", "replace"))
            lines = zip(pieces[::2], pieces[1::2], strict=False)
            shown = "".join(
                f"[rank {rank}] {line}{end}" for line, end in lines if not self._NOISE.fullmatch(line)
            )
            if shown:
                self._write(stream, shown)

    def flush(self) -> None:
        """Write out what is left, each rank's unfinished line ended (safe to repeat)."""
        for key in sorted(self.partial):
            rest = self.partial.pop(key)
            if rest:
                self._write(key[1], f"[rank {key[0]}] {rest.decode('utf-8', 'replace').rstrip(chr(13))}\n")

    @staticmethod
    def _write(stream: str, text: str) -> None:
        # Looked up on every write: IPython and pytest swap sys.stdout per cell and per test.
        target = sys.stdout if stream == "out" else sys.stderr
        if target is not None:
            target.write(text)
            target.flush()
