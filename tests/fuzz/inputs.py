"""Arguments of the fuzz programs' entry point, call by call, from a seed.

A program is called ``CALLS`` times per engine; each call gets fresh
arguments that change what guards see:

* call 0: float32 tensors of shape (3, 4), ``xs`` of 2 tensors;
* call 1: the dtype changes (float64), same shapes;
* call 2: the shape changes and ``x``/``y``/``xs`` are non-contiguous
  (transposed (5, 4) tensors), ``xs`` has 3 tensors;
* call 3: a third shape (transposed (7, 4) tensors), everything else as in
  call 2: under automatic dynamic shapes call 2 recompiled the sizes that
  changed as symbolic, and call 3 is meant to reuse that entry.

``k`` (a Python number) follows one of ``K_PATTERNS`` (ints, floats, a
``0.0``/``-0.0`` pair, a bool: ``x - True`` raises; ``bool_k=False`` replaces
the bool by 2, which the grammar's exclusion ``"bool_k"`` asks for).  ``make_args(seed, call)`` is deterministic
so that the eager and the captured run see equal inputs.  Nothing here runs
a program.
"""
from __future__ import annotations

import io
import random

import torch

CALLS = 4
K_PATTERNS = ([2, 3, 2, 5], [1.5, 0.5, -1.0, -1.0], [0.0, -0.0, 0.0, 0.0], [1, 1.0, True, True],
              [0.5, 0.5, 0.5, 0.5])


class Obj:
    """The object argument: attributes the programs read and write."""

    def __init__(self, w, count, log):
        self.w = w
        self.count = count
        self.log = log

    def __repr__(self):
        return f"Obj({vars(self)!r})"


def _tensor(gen: torch.Generator, call: int) -> torch.Tensor:
    if call == 0:
        return torch.randn(3, 4, generator=gen)
    if call == 1:
        return torch.randn(3, 4, generator=gen, dtype=torch.float64)
    if call == 2:
        return torch.randn(5, 4, generator=gen).t()  # (4, 5), non-contiguous
    return torch.randn(7, 4, generator=gen).t()  # (4, 7), non-contiguous


def make_args(seed: int, call: int, *, bool_k: bool = True) -> dict:
    """The keyword arguments of call number ``call`` of the program of ``seed``."""
    gen = torch.Generator().manual_seed(seed * 7919 + call)
    k = random.Random(seed).choice(K_PATTERNS)[call]
    if k is True and not bool_k:
        k = 2
    t = lambda: _tensor(gen, call)  # noqa: E731
    return {
        "x": t(), "y": t(), "xs": [t() for _ in range(2 if call < 2 else 3)],
        "d": {"a": t(), "n": min(call, 2) + 1},
        "obj": Obj(t(), min(call, 2), [min(call, 2)]),
        "buf": io.StringIO(),
        "k": k,
    }
