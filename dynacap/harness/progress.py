"""Progress bar with ETA for corpus runs (stderr).

On a terminal it redraws one line; otherwise it prints one line per finished
case, which reads well in CI logs.  It only displays; it must not touch
results.
"""
from __future__ import annotations

import os
import sys
import threading
import time
from collections import Counter


def _fmt(sec: float) -> str:
    sec = int(max(0, sec))
    h, rem = divmod(sec, 3600)
    m, s = divmod(rem, 60)
    return f"{h}:{m:02d}:{s:02d}" if h else f"{m}:{s:02d}"


class Progress:
    def __init__(self, total: int, compilers: list[str], stream=None, enabled: bool = True):
        self.total = total
        self.compilers = compilers
        self.stream = stream or sys.stderr
        self.enabled = enabled
        self.done = 0
        self.t0 = time.monotonic()
        self.counts = Counter()
        self.tty = bool(getattr(self.stream, "isatty", lambda: False)())
        self.t_first: float | None = None
        self._lock = threading.Lock()

    def columns(self) -> int:
        try:
            return os.get_terminal_size(self.stream.fileno()).columns
        except (AttributeError, OSError, ValueError):
            return 80

    def eta(self) -> str:
        """Time left at the pace since the first finished case: the first one also paid
        for starting the fork server, so it says nothing about the pace."""
        if self.done < 2 or self.t_first is None:
            return "?"
        pace = (time.monotonic() - self.t_first) / (self.done - 1)
        return _fmt(pace * (self.total - self.done))

    def line(self, last: str = "") -> str:
        """The redrawn line, cut to the terminal width (a longer one would wrap and stack)."""
        frac = self.done / self.total if self.total else 1.0
        width = 24
        bar = "#" * int(frac * width) + "." * (width - int(frac * width))
        el = time.monotonic() - self.t0
        stats = " ".join(f"{k}={v}" for k, v in sorted(self.counts.items()))
        text = (f"[{bar}] {self.done}/{self.total} {100 * frac:3.0f}% elapsed {_fmt(el)} "
                f"ETA {self.eta()} {last} {stats}").rstrip()
        return text[:max(10, self.columns() - 1)]

    def update(self, rec: dict) -> None:
        if not self.enabled:
            return
        with self._lock:
            self.done += 1
            if self.t_first is None:
                self.t_first = time.monotonic()
            sts = [(rec.get("results") or {}).get(c, {}).get("status", "?") for c in self.compilers]
            for c, st in zip(self.compilers, sts):
                self.counts[f"{c}:{st}"] += 1 if len(self.compilers) > 1 else 0
                if len(self.compilers) == 1:
                    self.counts[st] += 1
            shown = " ".join(f"{c}={st}" for c, st in zip(self.compilers, sts)) if len(sts) > 1 else sts[0]
            last = f"{rec.get('id')} -> {shown}"
            if self.tty:
                self.stream.write("\r\x1b[K" + self.line(last[-60:]))
                if self.done == self.total:
                    self.stream.write("\n")
            else:
                self.stream.write(f"[{self.done}/{self.total} ETA {self.eta()}] {shown}  {rec.get('id')}\n")
            self.stream.flush()

    def note(self, msg: str) -> None:
        if self.enabled:
            with self._lock:
                self.stream.write(("\r\x1b[K" if self.tty else "") + msg + "\n")
                self.stream.flush()
