"""String formatting, written in Python: ``str.join`` and ``%`` with values the trace holds.
"""
from __future__ import annotations


def join(separator, iterable):
    """``str.join``: the items taken at once (``PySequence_Fast``), each one a str, then joined."""
    items = list(iterable)  # an exact list or tuple is read as it is: the same items
    for i, item in enumerate(items):
        if not isinstance(item, str):
            raise TypeError(f"sequence item {i}: expected str instance, {type(item).__name__} found")
    return separator.join(tuple(items))


#: Methods of constants modelled when their arguments are not all constants (``",".join(generator)``):
#: (type, name) -> model taking the constant first, read by ``values.functions.ConstantMethodValue``.
METHODS = {
    (str, "join"): join,
}

MODELS: dict = {}
