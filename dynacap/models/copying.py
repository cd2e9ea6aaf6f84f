"""``copy.copy`` and ``copy.deepcopy`` written in Python: the copy module's walk (the memo, ``__deepcopy__``,
``__reduce_ex__``-free rebuilding of plain containers and user objects), traced in place of the real one.

Nothing here runs at capture time: the interpreter inlines these functions as user code.  A tensor is
copied by ``Tensor.__deepcopy__``'s own rule, a graph operation.
"""
from __future__ import annotations

import collections
import functools
import types
import weakref

import torch

#: Classes whose objects ``copy`` gives back as they are (its dispatch tables' atoms), by module and name: a
#: class object of ``types`` read in a trace is wrapped, and ``FunctionType``'s ``__code__`` is a descriptor.
_ATOMIC = frozenset((t.__module__, t.__qualname__) for t in (
    type(None), int, float, bool, complex, bytes, str, types.CodeType, type, range, types.BuiltinFunctionType,
    type(Ellipsis), type(NotImplemented), types.FunctionType, weakref.ref, property))
_NIL = []


class _Memo:
    """``deepcopy``'s memo: the originals copied so far and their copies, found by identity (``find``/``keep``).

    The copy module keys its memo by ``id()``, which a trace cannot know, so the walk here compares the
    values themselves with ``is`` (only originals of the same type: a tuple is never asked whether it is a
    list).  Code of others given the memo (a class's own ``__deepcopy__(memo)``, the copy module's
    ``_reconstruct``) uses it as the copy module's dict keyed by ``id()``; that code runs eagerly (``id()`` is
    known at run time only), and its entries live in ``by_id``.
    """

    def __init__(self):
        self.originals = []
        self.copies = []
        self.by_id = {}

    def find(self, x, default):
        cls = type(x)
        for i in range(len(self.originals)):
            original = self.originals[i]
            if type(original) is cls and original is x:
                return self.copies[i]
        if self.by_id:
            return self.by_id.get(id(x), default)
        return default

    def keep(self, x, y):
        self.originals.append(x)
        self.copies.append(y)

    # The copy module's dict protocol, by id(), for code of others (run eagerly).
    def get(self, key, default=None):
        return self[key] if key in self else default

    def __contains__(self, key):
        return key in self.by_id or any(id(o) == key for o in self.originals)

    def __getitem__(self, key):
        if key in self.by_id:
            return self.by_id[key]
        for i in range(len(self.originals)):
            if id(self.originals[i]) == key:
                return self.copies[i]
        raise KeyError(key)

    def __setitem__(self, key, value):
        self.by_id[key] = value

    def setdefault(self, key, default=None):
        if key not in self:
            self[key] = default
        return self[key]


class _DictMemo:
    """The caller's own memo dict, keyed by ``id()`` as the copy module keys it (``id()`` is read at run time)."""

    def __init__(self, d):
        self.d = d

    def find(self, x, default):
        return self.d.get(id(x), default)

    def keep(self, x, y):
        self.d[id(x)] = y
        self.d.setdefault(id(self.d), []).append(x)

    def shared(self):
        return self.d


def copy(x):
    """``copy.copy``: atoms and immutable containers as they are, ``list``/``dict``/``set`` by ``.copy()``, a class's
    ``__copy__``, a plain object rebuilt by ``cls.__new__(cls)`` and its ``__dict__`` (``__reduce_ex__(4)``)."""
    cls = type(x)
    if _atomic(cls) or cls in (tuple, frozenset) or issubclass(cls, type):
        return x
    if cls in (list, dict, set, bytearray) or cls is collections.deque or cls is collections.defaultdict:
        return x.copy()  # the dispatch table's, and deque's and defaultdict's __copy__
    if cls is collections.OrderedDict:
        return _rebuilt_dict(x, None)
    copier = getattr(cls, "__copy__", None)
    if copier is not None:
        return copier(x)
    if _plain_reduce(cls):
        return _rebuilt_object(x, None)
    return _real_reduce(x, None)


def deepcopy(x, memo=None, _nil=_NIL):
    """``copy.deepcopy``: the same walk as the copy module's, the memo by identity (``_Memo``)."""
    if memo is None:
        memo = _Memo()
    elif type(memo) is not _Memo and type(memo) is not _DictMemo:
        memo = _DictMemo(memo)
    y = memo.find(x, _nil)
    if y is not _nil:
        return y
    cls = type(x)
    if _atomic(cls) or issubclass(cls, type):
        y = x
    elif cls is list:
        y = []
        memo.keep(x, y)
        for a in x:
            y.append(deepcopy(a, memo))
    elif cls is tuple:
        return _deepcopy_tuple(x, memo)
    elif cls is dict:
        y = {}
        memo.keep(x, y)
        for key, value in x.items():
            y[deepcopy(key, memo)] = deepcopy(value, memo)
    elif cls is set or cls is frozenset:
        # ``set.__reduce__``: the class called on the (copied) items; the result memoized.
        y = cls([deepcopy(a, memo) for a in x])
    elif cls is types.MethodType:
        y = cls(x.__func__, deepcopy(x.__self__, memo))
    elif cls is torch.Tensor:
        y = _deepcopy_tensor(x, memo)
    elif cls is collections.OrderedDict:
        y = _rebuilt_dict(x, memo)
    elif cls is collections.defaultdict:
        y = cls(deepcopy(x.default_factory, memo))
        memo.keep(x, y)
        for key, value in x.items():
            y[deepcopy(key, memo)] = deepcopy(value, memo)
    elif cls is collections.deque:
        y = cls((), x.maxlen)
        memo.keep(x, y)
        for item in x:
            y.append(deepcopy(item, memo))
    else:
        copier = getattr(x, "__deepcopy__", None)
        if copier is not None:
            y = copier(_shared(memo))
        elif _plain_reduce(cls):
            y = _rebuilt_object(x, memo)
        else:
            y = _real_reduce(x, memo)
    if y is not x:
        memo.keep(x, y)
    return y


def _shared(memo):
    """The memo as code of others takes it (``_Memo``, or the caller's own dict)."""
    return memo.shared() if type(memo) is _DictMemo else memo


def _atomic(cls) -> bool:
    return (cls.__module__, cls.__qualname__) in _ATOMIC


def _deepcopy_tuple(x, memo):
    """The copy module's, and ``deepcopy``'s memo step: a new tuple is memoized, ``x`` itself is not (so no
    ``is`` is asked between two tuples, which two values of one tuple read through two paths may be)."""
    y = [deepcopy(a, memo) for a in x]
    found = memo.find(x, _NIL)
    if found is not _NIL:
        return found
    for k, j in zip(x, y):
        if k is not j:
            y = tuple(y)
            memo.keep(x, y)
            return y
    return x


def _deepcopy_tensor(x, memo):
    """``Tensor.__deepcopy__`` of a plain tensor: a leaf with the same values (``clone``).

    A tensor not made by the user (a result that requires grad) raises as in eager; one that requires
    grad, has a grad, or is not dense from its storage's start (its copy keeps the storage, offset and
    strides, and is a new leaf) is copied by the real method.  A dense tensor in another order (a transposed
    one) is a ``clone`` too: ``preserve_format`` keeps its strides, which the real method cannot give under
    symbolic sizes (it reads the storage's size)."""
    if not x.is_leaf:
        raise RuntimeError("Only Tensors created explicitly by the user (graph leaves) support the deepcopy protocol "
                           "at the moment.  If you were attempting to deepcopy a module, this may be because of a "
                           "torch.nn.utils.weight_norm usage, see https://github.com/pytorch/pytorch/pull/103001")
    if x.requires_grad or x.grad is not None or x.is_sparse or x.storage_offset() != 0:
        return x.__deepcopy__({})  # x is not in the memo; its storage is copied for it alone
    y = x.clone()
    if x.is_contiguous() or y.stride() == x.stride():  # dense: the copy has x's sizes and strides
        return y
    return x.__deepcopy__({})


def _rebuilt_dict(x, memo):
    """``OrderedDict.__reduce__`` rebuilt (``copy._reconstruct``): a new one, then each item in order."""
    y = type(x)()
    if memo is not None:
        memo.keep(x, y)
    for key, value in x.items():
        if memo is not None:
            key, value = deepcopy(key, memo), deepcopy(value, memo)
        y[key] = value
    return y


@functools.lru_cache(maxsize=0)  # a pure function of the class: the tracer runs it on the class, at capture time
def _plain_reduce(cls) -> bool:
    """Whether ``object.__reduce_ex__(4)`` is what copies ``cls``'s objects: ``copyreg.__newobj__(cls)`` and the
    instance ``__dict__`` as the state, nothing of the class's own (``__reduce__``, ``__getstate__``,
    ``__setstate__``, ``__slots__``, a built-in base)."""
    import copyreg

    return (cls not in copyreg.dispatch_table and cls.__reduce_ex__ is object.__reduce_ex__
            and cls.__reduce__ is object.__reduce__ and cls.__getstate__ is object.__getstate__
            and getattr(cls, "__setstate__", None) is None and cls.__new__ is object.__new__
            and "__slots__" not in cls.__dict__ and cls.__mro__[-2:] == (cls.__mro__[-2], object)
            and _no_builtin_base(cls))


def _no_builtin_base(cls) -> bool:
    for base in cls.__mro__[1:-1]:
        if base.__module__ == "builtins" or base.__flags__ & (1 << 9) == 0:  # not a heap type: written in C
            return False
    return True


def _rebuilt_object(x, memo):
    """``copy._reconstruct(x, memo, copyreg.__newobj__, (cls,), x.__dict__)``."""
    cls = type(x)
    y = object.__new__(cls)  # cls.__new__ is object's (_plain_reduce)
    if memo is not None:
        memo.keep(x, y)
    state = x.__dict__
    if state:
        if memo is not None:
            # ``deepcopy(state, memo)``, except that the state dict itself is not memoized: nothing else
            # holds an object's ``__dict__`` (and its identity is not one a trace can compare).
            copied = {}
            for key, value in state.items():
                copied[deepcopy(key, memo)] = deepcopy(value, memo)
            state = copied
        y.__dict__.update(state)
    return y


def _real_reduce(x, memo):
    """The class's own reduction (``__reduce_ex__(4)``) rebuilt by the copy module's ``_reconstruct``."""
    import copy as real

    rv = x.__reduce_ex__(4)
    if isinstance(rv, str):
        return x
    return real._reconstruct(x, None if memo is None else _shared(memo), *rv)


#: What this file models, read by ``trace_rules``: dotted name -> (model, why the model is faithful).
MODELS = {
    "copy.copy": (copy, "the copy module's dispatch in Python"),
    "copy.deepcopy": (deepcopy, "the copy module's walk in Python, its memo by identity"),
}
