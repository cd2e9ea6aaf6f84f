"""Construct programs (issue 8): each one Python construct around tensor ops, registered by family.

A program is a plain function of tensors (and sometimes ints, lists or dicts) that
``tests/test_constructs.py`` runs eagerly and under ``dynacap.optimize(fullgraph=True)``, and
``benchmarks/constructs.py`` under both dynacap and torch.compile.  Each family is one module of
this package (its name is the family); importing the package registers them all in ``PROGRAMS``.
This package must not import dynacap: the programs are ordinary Python, engine-independent.
"""
from __future__ import annotations

import dataclasses
import importlib
import typing

import torch

#: Families whose programs break on purpose (a tensor's value read into Python) for both engines: they
#: check what a break keeps (results, inputs, globals, printed text), not the graph count.
BREAK_BY_DESIGN = ("across_breaks", "breaks_inside")
FAMILIES = ("objects", "dunders", "records", "builtins_", "stdlib", "exceptions", "control", "state", "traps",
            "iteration", "handlers", "protocols", "across_breaks", "breaks_inside")


@dataclasses.dataclass
class Construct:
    name: str
    family: str
    fn: typing.Callable
    inputs: typing.Callable[[], tuple]
    #: Other inputs (other ints, strings, lengths...) to call the captured function with afterwards:
    #: its guards must tell them apart (a new graph is fine, the old graph's answer is not).
    other: typing.Optional[typing.Callable[[], tuple]] = None

    def build(self, other: bool = False) -> tuple:
        """Fresh inputs, the same on every call (seeded)."""
        torch.manual_seed(0)
        return (self.other if other else self.inputs)()


PROGRAMS: dict[str, Construct] = {}


def x4():
    return (torch.randn(4),)


def xy():
    return (torch.randn(4), torch.randn(4))


def x23():
    return (torch.randn(2, 3),)


def construct(inputs=x4, other=None):
    """Register the decorated function as a program of its module's family (``other``: see ``Construct``)."""
    def register(fn):
        family = fn.__module__.rsplit(".", 1)[-1].rstrip("_")
        assert fn.__name__ not in PROGRAMS, f"two programs named {fn.__name__}"
        PROGRAMS[fn.__name__] = Construct(fn.__name__, family, fn, inputs, other)
        return fn
    return register


for _family in FAMILIES:
    importlib.import_module(f"{__name__}.{_family}")
