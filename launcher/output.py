"""The ranks' output, relayed into the cell that called `launch`, each line prefixed with its rank."""

from __future__ import annotations

import re
import sys


class OutputPrinter:
    """Relays the ranks' output as it comes, each line prefixed with its rank.

    A complete line goes out at once; so does a progress line that ends in ``\r`` (each
    rewrite of it keeps the prefix); the rest waits for the end of its line.
    """

    _LINE_END = re.compile(r"(\r\n|\n|\r)")

    def __init__(self) -> None:
        self.partial: dict[tuple[int, str], bytes] = {}

    def feed(self, rank: int, stream: str, data: bytes) -> None:
        text = self.partial.get((rank, stream), b"") + data
        cut = max(text.rfind(b"\n"), text.rfind(b"\r")) + 1  # ASCII: never inside a UTF-8 character
        self.partial[(rank, stream)] = text[cut:]
        if cut:
            pieces = self._LINE_END.split(text[:cut].decode("utf-8", "replace"))
            self._write(
                stream,
                "".join(
                    f"[rank {rank}] {line}{end}" for line, end in zip(pieces[::2], pieces[1::2], strict=False)
                ),
            )

    def flush(self) -> None:
        for (rank, stream), rest in sorted(self.partial.items()):
            if rest:
                self._write(stream, f"[rank {rank}] {rest.decode('utf-8', 'replace')}\n")
        self.partial.clear()

    @staticmethod
    def _write(stream: str, text: str) -> None:
        # Looked up on every write: IPython and pytest swap sys.stdout per cell and per test.
        target = sys.stdout if stream == "out" else sys.stderr
        if target is not None:
            target.write(text)
            target.flush()
