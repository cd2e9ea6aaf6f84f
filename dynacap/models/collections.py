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


def counter_init(self, iterable=None, /, **kwds):
    """``Counter.__init__``: the counts of ``iterable`` (and of ``kwds``)."""
    counter_update(self, iterable, **kwds)


def counter_update(self, iterable=None, /, **kwds):
    """``Counter.update``: a mapping's counts are added, any other iterable's items counted one by one
    (through the object's own ``get`` and ``__setitem__``, as ``_count_elements`` does)."""
    import collections.abc

    if iterable is not None:
        if isinstance(iterable, collections.abc.Mapping):
            for elem, count in iterable.items():
                self[elem] = count + self.get(elem, 0)
        else:
            for elem in iterable:
                self[elem] = self.get(elem, 0) + 1
    if kwds:
        counter_update(self, kwds)


def counter_missing(self, key):
    """``Counter.__missing__``: a missing element counts zero (and is not added)."""
    return 0


def counter_most_common(self, n=None):
    """``Counter.most_common``: (element, count) pairs, highest count first, ties in insertion order."""
    ranked = sorted(self.items(), key=_count, reverse=True)
    return ranked if n is None else ranked[:n]


def counter_total(self):
    """``Counter.total``: the sum of the counts."""
    return sum(self.values())


def _count(pair):
    return pair[1]


def counter_elements(self):
    """``Counter.elements``: each element repeated by its count, in insertion order (``chain.from_iterable(
    starmap(repeat, self.items()))``: a count below one gives nothing)."""
    for elem, count in self.items():
        for _ in range(count):
            yield elem


def asdict(obj, *, dict_factory=dict):
    """``dataclasses.asdict``: the fields of a dataclass instance, recursively, as dicts (3.11's walk)."""
    import dataclasses

    if not dataclasses._is_dataclass_instance(obj):
        raise TypeError("asdict() should be called on dataclass instances")
    return _asdict_inner(obj, dict_factory)


def _asdict_inner(obj, dict_factory):
    import copy
    import dataclasses

    if dataclasses._is_dataclass_instance(obj):
        result = []
        for f in dataclasses.fields(obj):
            result.append((f.name, _asdict_inner(getattr(obj, f.name), dict_factory)))
        return dict_factory(result)
    if isinstance(obj, tuple) and hasattr(obj, "_fields"):
        return type(obj)(*[_asdict_inner(v, dict_factory) for v in obj])
    if isinstance(obj, (list, tuple)):
        return type(obj)(_asdict_inner(v, dict_factory) for v in obj)
    if isinstance(obj, dict):
        return type(obj)((_asdict_inner(k, dict_factory), _asdict_inner(v, dict_factory)) for k, v in obj.items())
    if type(obj) in (int, float, bool, str, bytes, complex, type(None)):
        return obj  # what ``copy.deepcopy`` gives for an immutable atom
    return copy.deepcopy(obj)


#: What this file models, read by ``trace_rules``: dotted name -> (model, why the model is faithful).
MODELS = {
    "dataclasses.asdict": (asdict, "the same walk over the fields in Python"),
    "collections.Counter.elements": (counter_elements, "the same items, the real one chains C iterators"),
}

#: Standard-library functions traced like user code although their files are skipped: pure Python whose
#: only effect is their result (``dataclasses.fields`` in ``ModelOutput.__post_init__``).
TRACED = {
    **{f"collections.Counter.{name}": "pure Python over the counts" for name in (
        "__add__", "__sub__", "__or__", "__and__", "__pos__", "__neg__", "__iadd__", "__isub__", "__ior__",
        "__iand__", "_keep_positive", "subtract", "copy", "__delitem__", "__eq__", "__ne__", "__le__", "__lt__",
        "__ge__", "__gt__")},
    "collections.ChainMap": "pure Python over its maps",
    **{f"_collections_abc.{name}": "pure Python: views over the mapping's own methods" for name in (
        "Mapping.keys", "Mapping.items", "Mapping.values", "MappingView", "KeysView", "ItemsView", "ValuesView")},
    "collections.namedtuple.<locals>._make": "pure Python: tuple.__new__(cls, iterable) and a length check",
    "dataclasses.fields": "pure Python",
    "dataclasses._is_dataclass_instance": "pure Python",
    "dataclasses.replace": "pure Python: reads the fields, calls the class",
}
