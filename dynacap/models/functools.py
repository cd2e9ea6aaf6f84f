"""``functools``' decorators and descriptors, written in Python: traced in place of the real ones.

The real ones take locks (``cached_property``), keep weak caches keyed by ABC tokens
(``singledispatch``) or are C (``cmp_to_key``); the models do what they do to the values a trace
holds.  Anything outside what a model follows (an ABC registered with ``singledispatch``) is a
break with the reason, never a different answer.
"""
from __future__ import annotations

import functools

#: What ``memo.get(key, _MISSING)`` returns for a key not cached (never a value of user code).
_MISSING = object()


# -- cached_property -----------------------------------------------------------------------------------------------
def cached_property_get(self, instance, owner=None):
    """``cached_property.__get__`` without its lock (a trace runs on one thread): computed once, then stored in
    the instance ``__dict__``, which later reads find first (it is not a data descriptor)."""
    if instance is None:
        return self
    if self.attrname is None:
        raise TypeError("Cannot use cached_property instance without calling __set_name__ on it.")
    try:
        cache = instance.__dict__
    except AttributeError:
        raise TypeError(f"No '__dict__' attribute on {type(instance).__name__!r} instance to cache "
                        f"{self.attrname!r} property.") from None
    value = cache.get(self.attrname, _MISSING)
    if value is _MISSING:
        value = self.func(instance)
        # ``cache[name] = value``: the class has no data descriptor of that name (this one was found), so the
        # generic store puts it in the same ``__dict__``, bypassing the class's own ``__setattr__`` as eager does.
        object.__setattr__(instance, self.attrname, value)
    return value


# -- cmp_to_key ------------------------------------------------------------------------------------------------------
class _CmpKey:
    """What ``cmp_to_key(cmp)(obj)`` makes: compared by ``cmp(a, b)`` against 0, unhashable."""

    def __init__(self, cmp, obj):
        self.cmp = cmp
        self.obj = obj

    def __lt__(self, other):
        return self.cmp(self.obj, other.obj) < 0

    def __gt__(self, other):
        return self.cmp(self.obj, other.obj) > 0

    def __eq__(self, other):
        return self.cmp(self.obj, other.obj) == 0

    def __le__(self, other):
        return self.cmp(self.obj, other.obj) <= 0

    def __ge__(self, other):
        return self.cmp(self.obj, other.obj) >= 0

    __hash__ = None


def cmp_to_key(mycmp):
    # A closure: a key made in the trace never leaves the graph (rebuilt, it would be an object of this model's
    # class, not of functools' KeyWrapper); returning one is a break.
    def compare(a, b):
        return mycmp(a, b)

    def key(obj):
        return _CmpKey(compare, obj)

    return key


# -- lru_cache / cache -----------------------------------------------------------------------------------------------
def lru_cache_wrapper(user_function, maxsize, typed, cache_info_type):
    """``_functools._lru_cache_wrapper`` (what ``lru_cache``/``cache``, traced, build): a function made in the
    trace whose cache lives as long as it does, with CPython's hits, misses and least-recently-used eviction.
    Arguments are keys as ``_make_key`` makes them (a tensor argument is not a key the trace holds: a break)."""
    memo = {}
    stats = [0, 0]  # hits, misses

    def wrapper(*args, **kwargs):
        key = _make_key(args, kwargs, typed)
        if maxsize == 0:
            stats[1] += 1
            return user_function(*args, **kwargs)
        result = memo.get(key, _MISSING)
        if result is not _MISSING:
            stats[0] += 1
            if maxsize is not None:
                del memo[key]  # now the most recently used
                memo[key] = result
            return result
        stats[1] += 1
        result = user_function(*args, **kwargs)
        if key in memo:
            return result  # the call itself cached it (recursion): CPython keeps that entry
        if maxsize is not None and len(memo) >= maxsize:
            del memo[next(iter(memo))]
        memo[key] = result
        return result

    def cache_info():
        return cache_info_type(stats[0], stats[1], maxsize, len(memo))

    def cache_clear():
        memo.clear()
        stats[0] = stats[1] = 0

    wrapper.cache_info = cache_info
    wrapper.cache_clear = cache_clear
    return wrapper


def _make_key(args, kwargs, typed):
    """A key equal where ``functools._make_key``'s is: the arguments, keyword order, and types when ``typed``."""
    if not kwargs and not typed and len(args) == 1 and type(args[0]) in (int, str):
        # CPython's short path: the bare int or str, never equal to the key of ``1.0`` or ``True``.
        return args[0]
    if typed:
        return args, tuple(kwargs.items()), tuple([type(v) for v in args]), tuple([type(v) for v in kwargs.values()])
    return args, tuple(kwargs.items())


# -- singledispatch --------------------------------------------------------------------------------------------------
def singledispatch(func):
    """``functools.singledispatch``: the implementation of the first argument's class, found by walking its MRO
    through the registry.  Once an ABC is registered, dispatch is the real ``_find_impl`` (ABCs are not in the
    MRO; it is not traced: a break)."""
    registry = {object: func}
    abstract = []

    def dispatch(cls):
        if cls in registry:
            return registry[cls]
        if abstract:
            return functools._find_impl(cls, registry)
        for klass in cls.__mro__:
            if klass in registry:
                return registry[klass]
        return None

    def register(cls, func=None):
        if isinstance(cls, type) or _union_classes(cls) is not None:
            if func is None:
                return lambda f: register(cls, f)
        else:
            if func is not None:
                raise TypeError(f"Invalid first argument to `register()`. {cls!r} is not a class or union type.")
            annotations = getattr(cls, "__annotations__", {})
            if not annotations:
                raise TypeError(f"Invalid first argument to `register()`: {cls!r}. Use either "
                                "`@register(some_class)` or plain `@register` on an annotated function.")
            func = cls
            argname, cls = next(iter(annotations.items()))
            if not isinstance(cls, type):
                # A string or other annotation ``get_type_hints`` resolves: the real one reads it (a break).
                import typing

                argname, cls = next(iter(typing.get_type_hints(func).items()))
            if not isinstance(cls, type) and _union_classes(cls) is None:
                raise TypeError(f"Invalid annotation for {argname!r}. {cls!r} is not a class.")
        classes = (cls,) if isinstance(cls, type) else _union_classes(cls)
        for klass in classes:
            registry[klass] = func
            if hasattr(klass, "__abstractmethods__"):
                abstract.append(klass)
        return func

    def wrapper(*args, **kw):
        if not args:
            raise TypeError(f"{funcname} requires at least 1 positional argument")
        return dispatch(args[0].__class__)(*args, **kw)

    funcname = getattr(func, "__name__", "singledispatch function")
    wrapper.register = register
    wrapper.dispatch = dispatch
    # The registry itself, where eager gives a read-only view of it (a view cannot be made in the trace).
    wrapper.registry = registry
    wrapper._clear_cache = _no_dispatch_cache
    functools.update_wrapper(wrapper, func)
    return wrapper


def _union_classes(cls):
    """The classes of ``int | str`` or ``Union[int, str]`` when they are all classes, else None."""
    import types
    import typing

    if typing.get_origin(cls) not in (typing.Union, types.UnionType):
        return None
    classes = typing.get_args(cls)
    return classes if all(isinstance(c, type) for c in classes) else None


def _no_dispatch_cache():
    """``_clear_cache`` of a model's generic function: it keeps no cache of dispatches."""


#: What this file models, read by ``trace_rules``: dotted name -> (model, why the model is faithful).
MODELS = {
    "functools.cached_property.__get__": (cached_property_get, "the same lookup and store, without the lock"),
    "_functools.cmp_to_key": (cmp_to_key, "keys compared by the function against 0"),
    "functools._lru_cache_wrapper": (lru_cache_wrapper, "the same cache, hits and eviction, made in the trace"),
    "functools.singledispatch": (singledispatch, "the registry walked along the class's MRO"),
}

#: Standard-library functions traced like user code although their files are skipped: pure Python.
TRACED = {
    "functools.lru_cache": "pure Python: checks the arguments, builds the C wrapper (a model)",
    "functools.cache": "pure Python: lru_cache(maxsize=None)",
    "functools.wraps": "pure Python: a partial of update_wrapper",
    "functools.update_wrapper": "pure Python: copies the wrapped function's name parts and __dict__",
    # ``total_ordering``'s generated comparisons: one call of the class's own method, then ``==``/``not``.
    **{f"functools._{op}_from_{base}": "pure Python: the class's own comparison, then == or not"
       for base, ops in (("lt", ("gt", "le", "ge")), ("le", ("ge", "lt", "gt")), ("gt", ("lt", "ge", "le")),
                         ("ge", ("le", "gt", "lt"))) for op in ops},
}
