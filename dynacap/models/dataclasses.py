"""``dataclasses`` helpers, written in Python or traced as they are (their ``TRACED`` rules).

Models walk the fields as 3.11's do; they never create classes (``@dataclass`` runs at class
creation, which is not captured).
"""
from __future__ import annotations


def astuple(obj, *, tuple_factory=tuple):
    """``dataclasses.astuple``: the fields of a dataclass instance, recursively, as tuples (3.11's walk)."""
    import dataclasses

    if not dataclasses._is_dataclass_instance(obj):
        raise TypeError("astuple() should be called on dataclass instances")
    return _astuple_inner(obj, tuple_factory)


def _astuple_inner(obj, tuple_factory):
    import copy
    import dataclasses

    if dataclasses._is_dataclass_instance(obj):
        result = []
        for f in dataclasses.fields(obj):
            result.append(_astuple_inner(getattr(obj, f.name), tuple_factory))
        return tuple_factory(result)
    if isinstance(obj, tuple) and hasattr(obj, "_fields"):
        return type(obj)(*[_astuple_inner(v, tuple_factory) for v in obj])
    if isinstance(obj, (list, tuple)):
        return type(obj)(_astuple_inner(v, tuple_factory) for v in obj)
    if isinstance(obj, dict):
        return type(obj)((_astuple_inner(k, tuple_factory), _astuple_inner(v, tuple_factory)) for k, v in obj.items())
    if type(obj) in (int, float, bool, str, bytes, complex, type(None)):
        return obj  # what ``copy.deepcopy`` gives for an immutable atom
    return copy.deepcopy(obj)


#: What this file models, read by ``trace_rules``: dotted name -> (model, why the model is faithful).
MODELS = {
    "dataclasses.astuple": (astuple, "the same walk over the fields in Python"),
}

#: Standard-library functions traced like user code although their files are skipped: pure Python whose
#: only effect is their result.
TRACED = {
    "dataclasses.is_dataclass": "pure Python: reads the class's __dataclass_fields__",
}
