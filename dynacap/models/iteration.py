"""``itertools`` iterators written as generators: traced lazily, item by item, as the C ones run.

Each model yields what the real iterator yields, pulling from its inputs in the
same order (side effects of generators it consumes interleave as in eager).
"""
from __future__ import annotations


def never_eager(kwargs: dict) -> None:
    return None


def chain(*iterables):
    for iterable in iterables:
        yield from iterable


def chain_from_iterable(iterables):
    for iterable in iterables:
        yield from iterable
