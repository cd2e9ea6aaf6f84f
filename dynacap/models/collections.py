"""``collections`` and ``collections.abc`` behaviour written in Python: traced in place of the C (or the
standard library's) code, pulling and raising as the real one does.

Nothing here runs at capture time: the interpreter inlines these functions as user code.
"""
from __future__ import annotations


def sequence_iter(sequence):
    """``collections.abc.Sequence.__iter__``: ``sequence[0]``, ``sequence[1]``... until ``IndexError``.

    The ``try`` covers the read only (the real one also covers the ``yield``, which matters only to
    ``generator.throw``, never to a loop).
    """
    i = 0
    while True:
        try:
            v = sequence[i]
        except IndexError:
            return
        yield v
        i += 1
