"""Objects of user subclasses of ``dict``, ``OrderedDict`` (HuggingFace's ``ModelOutput``) and ``list``, and
named tuples (``NamedTupleValue``).

Such an object has two parts: its instance ``__dict__`` (attributes, as for
any object) and the built-in dict it is (its items).  Made by the captured
code (``NewDictObjectValue``), the items are a ``DictValue`` of the trace
(``ItemStorage``) next to the attributes; read from the frame, the items are
read past the class's own methods (``dict.__getitem__(obj, k)``) and guarded
by the key list the base class's own ``keys`` gives.

The class's Python methods (``__getitem__``, ``__setitem__``, ``to_tuple``...)
are inlined as for any object; what they reach of the built-in base (the
class's inherited ``keys``/``__len__``, ``super().__setitem__``) acts on the
items.  The engine never calls the class's methods itself: a frame object's
keys are read with the base's ``keys``, and an object made here is rebuilt by
``Base.__new__(cls)``, ``Base.__setitem__(obj, k, v)`` per item and its
``__dict__`` entries (no ``__init__``, ``__setitem__`` or ``__setattr__`` of
the class runs).  Only reading methods of a frame object's items are modelled:
changing them breaks.  A list subclass object made in the trace is the same
with a list of the trace (``NewListObjectValue``).  A named tuple (a class made
by ``collections.namedtuple``, or a subclass keeping its ``__new__``) is a
tuple value of that class: made by binding its generated ``__new__``'s
signature, read by field, rebuilt with ``tuple.__new__(cls, items)``.
"""
from __future__ import annotations

import collections
import types

from ..errors import GraphBreak
from ..source import DictStorageSource
from .base import Value
from .constant import ConstantValue, is_literal
from .containers import DictValue, DictViewValue, IteratorValue, ListValue, TupleValue, missing_key
from .instances import NewObjectValue
from .protocols import key_value

_HEAP_TYPE = 1 << 9
#: The built-in classes (MRO order, ``object`` last) a user class may derive from, by its dict base.
_BASES = {(dict, object): dict, (collections.OrderedDict, dict, object): collections.OrderedDict}
#: Methods of the built-in base that read the items; ``NewDictObjectValue`` also models the writes.
_READING = frozenset({"__getitem__", "__len__", "__contains__", "__iter__", "keys", "values", "items", "get"})
_WRITING = frozenset({"__setitem__", "__delitem__"})
#: ``dict``'s own methods that change the items without calling any method of a subclass (they store with
#: the dict's own insert); ``OrderedDict``'s go through the subclass's ``__getitem__``/``__setitem__``.
_DICT_WRITING = frozenset({"setdefault", "pop", "update", "popitem", "clear"})


def dict_base(cls: type) -> type | None:
    """``dict`` or ``OrderedDict`` when they (and ``object``) are the only built-in classes ``cls`` derives
    from, else None."""
    mro = type.__dict__["__mro__"].__get__(cls)
    return _BASES.get(tuple(k for k in mro if not k.__flags__ & _HEAP_TYPE))


def container_base(cls: type) -> type | None:
    """The built-in container a user class made in the trace may derive from: ``dict``, ``OrderedDict``
    (``NewDictObjectValue``) or ``list`` (``NewListObjectValue``); None for any other class."""
    mro = type.__dict__["__mro__"].__get__(cls)
    builtins = tuple(k for k in mro if not k.__flags__ & _HEAP_TYPE)
    return list if builtins == (list, object) else _BASES.get(builtins)


def builtin_owner(cls: type, name: str) -> type | None:
    """The built-in class whose own attribute ``cls.<name>`` is (a ``dict`` method), None if a Python class
    of the MRO defines it first (or none does)."""
    for klass in type.__dict__["__mro__"].__get__(cls):
        if name in type.__dict__["__dict__"].__get__(klass):
            return None if klass.__flags__ & _HEAP_TYPE else klass
    return None


class ItemStorage(DictValue):
    """The items of a dict subclass object made in the trace: changing them changes the object."""

    def __init__(self, owner: "NewDictObjectValue", base: type):
        super().__init__({}, dict_type=base)
        self.owner = owner

    def describe(self):
        return f"the items of {self.owner.describe()}"

    def is_constant(self):
        return False

    def mutate(self, tx) -> None:
        self.mutated = True
        self.owner._changed(tx)

    def reconstruct(self, cg):
        self.owner.reconstruct(cg)

    def reconstruct_view(self, cg, kind: str) -> None:
        """``Base.keys(obj)`` (``values``/``items``): the base's view, whatever the class overrides."""
        cg.append("PUSH_NULL")
        cg.load_const(getattr(self.dict_type, kind))
        self.owner.reconstruct(cg)
        cg.append("PRECALL", 1)
        cg.append("CALL", 1)


def base_method(tx, value, name: str, items: DictValue, writable: bool) -> Value | None:
    """``name`` of the built-in dict base bound to ``value`` (its items: ``items``), or None if not modelled."""
    if name in _READING or writable and name in _WRITING:
        return _BaseMethod(value, name, items)
    if writable and name == "__init__":
        return _BaseInit(value)
    if writable and name in _DICT_WRITING and items.dict_type is dict:
        return items.getattr(tx, name)  # the dict's own method on the items (``ItemStorage.mutate``)
    return None


class _BaseInit(Value):
    """``super().__init__(...)`` reaching the built-in dict base of an object made in the trace."""

    def __init__(self, owner: "NewDictObjectValue"):
        self.owner = owner

    def describe(self):
        return f"{self.owner.base.__name__}.__init__"

    def call(self, tx, args, kwargs):
        self.owner.init_base(tx, args, kwargs)
        return ConstantValue(None)


class _BaseMethod(Value):
    """A method of the built-in base (``OrderedDict.keys``, ``dict.__setitem__``) bound to a subclass object."""

    def __init__(self, owner: Value, name: str, items: DictValue):
        self.owner = owner
        self.name = name
        self.items = items

    def describe(self):
        return f"method {self.name} of {self.owner.describe()}"

    def call(self, tx, args, kwargs):
        if kwargs:
            raise GraphBreak(f"{self.describe()} with keyword arguments (TypeError at run time)")
        return apply_base(tx, self.items, self.name, args, self.describe(), self.owner)


def apply_base(tx, items: DictValue, name: str, args: list[Value], what: str, owner=None) -> Value:
    """The built-in dict method ``name`` on ``items``, as CPython's runs it (no method of a subclass runs)."""
    arity = {"__getitem__": 1, "__contains__": 1, "__setitem__": 2, "__delitem__": 1, "__len__": 0,
             "__iter__": 0, "keys": 0, "values": 0, "items": 0}.get(name)
    if arity is not None and len(args) != arity or name == "get" and len(args) not in (1, 2):
        raise GraphBreak(f"{what} with {len(args)} argument(s) (TypeError at run time)")
    if name in ("keys", "values", "items"):
        return DictViewValue(items, name)
    if name == "__len__":
        return ConstantValue(len(items.items))
    if name == "__iter__":
        if isinstance(items, ItemStorage):
            from .live_iterators import DictIteratorValue

            return DictIteratorValue(items)  # sees (and refuses) changes of size, as dict's iterator
        return IteratorValue([key_value(k) for k in items.items])
    key = _constant_key(args[0], what)
    if name == "__getitem__":
        if key not in items.items and owner is not None and builtin_owner(type(owner.obj), "__missing__") is None \
                and _has(type(owner.obj), "__missing__"):
            return owner.call_special(tx, "__missing__", [args[0]], what)  # as dict.__getitem__ calls it
        if key not in items.items:
            raise missing_key(key, items.describe())  # catchable, as eager's KeyError
        return items.items[key]
    if name == "get":
        return items.items.get(key, args[1] if len(args) > 1 else ConstantValue(None))
    if name == "__contains__":
        return ConstantValue(key in items.items)
    if name == "__delitem__":
        if key not in items.items:
            raise missing_key(key, items.describe())
        items.mutate(tx)
        del items.items[key]
        return ConstantValue(None)
    items.mutate(tx)  # __setitem__
    items.items[key] = args[1]
    return ConstantValue(None)


def _has(cls: type, name: str) -> bool:
    from .objects import _MISSING, class_lookup

    return class_lookup(cls, name) is not _MISSING


def _constant_key(key: Value, what: str):
    if not key.is_constant() or not is_literal(key.as_constant()):
        raise GraphBreak(f"{what} with the key {key.describe()} (only constant keys are tracked)")
    return key.as_constant()


class NewDictObjectValue(NewObjectValue):
    """An object of a user subclass of ``dict``/``OrderedDict`` made in the trace: attributes and items."""

    def __init__(self, cls: type, class_source, born_in: tuple, base: type):
        super().__init__(cls, class_source, born_in, placeholder=base.__new__(cls))
        self.base = base
        self.storage = ItemStorage(self, base)

    def base_method(self, tx, name: str) -> Value | None:
        return base_method(tx, self, name, self.storage, writable=True)

    def iterator(self, tx) -> Value | None:
        """``iter(obj)`` with the base's ``__iter__``: the live iterator of the items (as over a dict)."""
        if builtin_owner(type(self.obj), "__iter__") is None:
            return super().iterator(tx)
        from .live_iterators import DictIteratorValue

        return DictIteratorValue(self.storage)

    def held_values(self) -> list[Value]:
        return [*self.storage.items.values(), *self.attrs.values()]

    def init_base(self, tx, args, kwargs) -> None:
        """The base's own ``__init__`` (``dict.__init__(self, *args, **kw)``): its items updated."""
        from .builtins.constructors import dict_items

        if len(args) > 1:
            raise GraphBreak(f"{self.base.__name__}.__init__ takes at most one positional argument "
                             "(TypeError at run time)")
        for key, value in dict_items(tx, args, kwargs).items():
            apply_base(tx, self.storage, "__setitem__", [key_value(key), value], "dict.__init__")

    def reconstruct(self, cg) -> None:
        """``Base.__new__(cls)``, its items through ``Base.__setitem__``, then its ``__dict__`` entries."""
        if cg.load_shared(self):
            return
        for child in self.held_values():
            if child.source is None and isinstance(child, (DictValue, NewObjectValue)) \
                    or type(child).__name__ == "ListValue":
                cg.share(child)  # the same runtime object in the items and the attributes
        cg.append("PUSH_NULL")
        cg.load_const(self.base.__new__)
        cg.load_const(type(self.obj))  # the class is guarded by identity
        cg.append("PRECALL", 1)
        cg.append("CALL", 1)
        cg.keep_shared(self)
        setitem = type.__dict__["__dict__"].__get__(self.base).get("__setitem__") or dict.__setitem__
        for key, value in self.storage.items.items():
            cg.append("PUSH_NULL")
            cg.load_const(setitem)
            cg.load_shared(self)
            cg.load_const(key)
            value.reconstruct(cg)
            cg.append("PRECALL", 3)
            cg.append("CALL", 3)
            cg.append("POP_TOP")
        self.fill_attributes(cg)
        cg.load_shared(self)


def frame_items(tx, value) -> DictValue:
    """The items of a dict subclass object read from the frame, past its class's methods, guarded by its
    keys (in the base class's order); each item is read with ``dict.__getitem__`` and guarded as read."""
    from .wrap import wrap

    cached = getattr(value, "frame_items", None)
    if cached is not None:
        return cached
    base = dict_base(type(value.obj))
    keys = list(type.__dict__["__dict__"].__get__(base).get("keys", dict.keys)(value.obj))
    if not all(type(k) is str for k in keys):
        raise GraphBreak(f"the items of {value.describe()} have keys other than strings")
    tx.guards.add("EQUALS_MATCH", value.source, "list({m}({s})) == {keys}",
                  f"keys of {value.describe()} == {keys}", m=base.keys, keys=keys)
    items = DictValue({k: wrap(tx, dict.__getitem__(value.obj, k), DictStorageSource(value.source, k))
                       for k in keys}, dict_type=base)
    value.frame_items = items
    return items


def namedtuple_fields(cls: type) -> tuple | None:
    """The field names of a ``collections.namedtuple`` class (or a subclass keeping its ``__new__`` and
    lookup), None for any other class."""
    from .objects import _MISSING, class_lookup, lookup_hook

    mro = type.__dict__["__mro__"].__get__(cls)
    if tuple(k for k in mro if not k.__flags__ & _HEAP_TYPE) != (tuple, object):
        return None
    fields, new = class_lookup(cls, "_fields"), class_lookup(cls, "__new__")
    new = new.__func__ if type(new) is staticmethod else new
    if type(fields) is not tuple or not all(type(f) is str for f in fields) or type(new) is not types.FunctionType \
            or new.__code__.co_filename != "<string>" or not new.__qualname__.endswith(".__new__"):
        return None
    if any(type(class_lookup(cls, f)) is not _TUPLE_GETTER for f in fields):
        return None  # a field shadowed by a property or method of a subclass
    if lookup_hook(cls, "__getattribute__") is not None or lookup_hook(cls, "__getattr__") is not None \
            or class_lookup(cls, "__init__") is not object.__init__ or class_lookup(cls, "__getitem__") \
            is not tuple.__getitem__ or class_lookup(cls, "__class__") is not object.__dict__["__class__"] \
            or class_lookup(cls, "__del__") is not _MISSING:
        return None
    return fields


#: Special methods a plain ``tuple`` subclass may define: the tuple's own behaviour (items, length,
#: equality, hashing, iteration) stays ``tuple``'s.
_TUPLE_CLASS_SPECIALS = frozenset({"__new__", "__module__", "__qualname__", "__doc__", "__dict__", "__weakref__",
                                   "__slots__", "__annotations__", "__orig_bases__", "__parameters__",
                                   "__init_subclass__", "__class_getitem__", "__repr__", "__str__", "__format__",
                                   "__match_args__", "__getnewargs__", "__firstlineno__", "__static_attributes__"})


def plain_tuple_class(cls: type) -> bool:
    """A user subclass of ``tuple`` alone whose objects behave as tuples (no special method of its own but
    ``__new__`` and the printing ones, ``object.__init__``): made in the trace as a ``NamedTupleValue``."""
    mro = type.__dict__["__mro__"].__get__(cls)
    if tuple(k for k in mro if not k.__flags__ & _HEAP_TYPE) != (tuple, object) or type(cls) is not type:
        return False
    for klass in mro:
        if klass.__flags__ & _HEAP_TYPE and any(name.startswith("__") and name.endswith("__") and
                                                name not in _TUPLE_CLASS_SPECIALS
                                                for name in type.__dict__["__dict__"].__get__(klass)):
            return False
    return True


def make_tuple_object(tx, cls_value: Value, args: list[Value], kwargs: dict) -> "NamedTupleValue":
    """``Cls(*args)`` for a ``plain_tuple_class``: its ``__new__`` traced (``super().__new__(cls, items)``
    ends in ``tuple.__new__``), or ``tuple.__new__(cls, iterable)`` itself; ``object.__init__`` then does
    nothing, as ``type.__call__`` runs it."""
    from ..source import AttrSource, ClassSource
    from .objects import class_lookup
    from .wrap import wrap

    cls = cls_value.as_constant()
    new = class_lookup(cls, "__new__")
    function = new.__func__ if type(new) is staticmethod else new
    if function is _TUPLE_NEW:
        return TupleNewValue().call(tx, [cls_value, *args], kwargs)
    if type(function) is not types.FunctionType:
        raise GraphBreak(f"creating a {cls.__qualname__} object: its __new__ is a {type(function).__name__}")
    new_value = wrap(tx, function, AttrSource(cls_value.source or ClassSource(cls), "__new__"))
    calling, tx.calling = tx.calling, False  # __new__'s result is not the CALL's
    try:
        return new_value.call(tx, [cls_value, *args], kwargs)
    finally:
        tx.calling = calling


_TUPLE_NEW = tuple.__dict__["__new__"]


class TupleNewValue(Value):
    """``tuple.__new__(cls, iterable=())``: a tuple of ``cls`` (a named tuple or plain tuple subclass) holding
    the iterable's items; no ``__new__``/``__init__`` of ``cls`` runs (``namedtuple``'s ``_make``)."""

    def __init__(self, source=None):
        self.source = source

    def describe(self):
        return "tuple.__new__"

    def real_object(self):
        return _TUPLE_NEW

    def call(self, tx, args, kwargs):
        from .objects import all_items

        if kwargs or len(args) not in (1, 2) or not args[0].is_constant() or not isinstance(args[0].as_constant(), type):
            raise GraphBreak(f"{self.describe()} with arguments other than a class and an iterable")
        cls = args[0].as_constant()
        if not issubclass(cls, tuple):
            raise GraphBreak(f"tuple.__new__({cls.__qualname__}): not a subtype of tuple (TypeError at run time)")
        items = all_items(tx, args[1]) if len(args) > 1 else []
        if cls is tuple:
            return TupleValue(items)
        if namedtuple_fields(cls) is None and not plain_tuple_class(cls):
            raise GraphBreak(f"tuple.__new__({cls.__qualname__}): a tuple subclass with special methods of its own")
        return NamedTupleValue(items, cls)


_PROBE = collections.namedtuple("_Probe", ["x"])
_TUPLE_GETTER = type(_PROBE.__dict__["x"])


def make_namedtuple(tx, cls_value: Value, args: list[Value], kwargs: dict) -> "NamedTupleValue":
    """``Cls(*args, **kwargs)`` for a namedtuple class: its generated ``__new__``'s binding, defaults included."""
    import inspect

    cls = cls_value.as_constant()
    new = cls.__new__
    try:
        bound = inspect.signature(new).bind(cls, *args, **kwargs)
    except TypeError as e:
        raise GraphBreak(f"{cls.__qualname__}(): {e} (TypeError at run time)") from None
    bound.apply_defaults()
    items = list(bound.arguments.values())[1:]
    for name, item in zip(cls._fields, items):
        if not isinstance(item, Value) and not is_literal(item):
            raise GraphBreak(f"{cls.__qualname__}(): the default of field {name!r} is a {type(item).__name__} "
                             "(one object shared by every tuple made)")
    return NamedTupleValue([v if isinstance(v, Value) else ConstantValue(v) for v in items], cls)


class NamedTupleValue(TupleValue):
    """A namedtuple (or a subclass of one): items by position and by field name, its class's methods.

    Also an object of a plain subclass of ``tuple`` (``plain_tuple_class``: ``fields`` is then None) made
    in the trace: its items, its class's methods and properties."""

    def __init__(self, items, cls: type, source=None):
        super().__init__(items, source)
        self.cls = cls
        self.fields = namedtuple_fields(cls)

    @classmethod
    def from_frame(cls, frame_items, tuple_class=None):
        value = cls([], tuple_class, frame_items.source)
        value._items = None
        value._frame = frame_items
        return value

    def python_type(self):
        return self.cls

    def is_constant(self):
        from .enums import user_dunders

        return super().is_constant() and not user_dunders(self.cls)

    def as_constant(self):
        if not self.is_constant():
            raise GraphBreak(f"{self.describe()} is used where a Python constant is needed")
        return tuple.__new__(self.cls, tuple(i.as_constant() for i in self.items))

    def describe(self):
        where = f" {self.source.expr()}" if self.source is not None else ""
        return f"{self.cls.__qualname__}{where}"

    def getattr(self, tx, name):
        from .functions import BoundMethodValue, UserFunctionValue
        from .objects import _MISSING, class_lookup
        from .wrap import wrap

        if self.fields is not None and name in self.fields:
            return self.item(self.fields.index(name))
        if name == "_fields" and self.fields is not None:
            return ConstantValue(self.fields)
        if name in ("_replace", "_asdict") and getattr(class_lookup(self.cls, name), "__code__", None) \
                is _PROBE.__dict__[name].__code__:
            return _NamedTupleMethod(self, name)
        if name in ("count", "index"):
            return super().getattr(tx, name)
        attr = class_lookup(self.cls, name)
        if type(attr) is _TUPLE_GETTER:
            # A field of a named-tuple base (``PackedSequence.batch_sizes``): the item at its index.
            return self.item(_TUPLE_GETTER.__reduce__(attr)[1][0])
        if type(attr) is types.FunctionType and attr.__code__.co_filename not in ("<string>", collections.__file__):
            return BoundMethodValue(UserFunctionValue(attr), self)  # a method of a user subclass
        if type(attr) is property and attr.fget is not None:
            calling, tx.calling = tx.calling, False  # the getter's result is not a CALL's
            try:
                return UserFunctionValue(attr.fget).call(tx, [self], {})
            finally:
                tx.calling = calling
        if attr is not _MISSING and is_literal(attr):
            return ConstantValue(attr)
        if attr is _MISSING:
            raise GraphBreak(f"{self.describe()} has no attribute {name!r} (AttributeError at run time)")
        return wrap(tx, attr, None) if type(attr) is type else super().getattr(tx, name)

    def reconstruct(self, cg):
        """``tuple.__new__(cls, items)``: the class's ``__new__`` (and any ``__init__``) does not run again."""
        from .containers import load_existing

        if load_existing(self, cg):
            return
        cg.append("PUSH_NULL")
        cg.load_const(tuple.__new__)
        cg.load_const(self.cls)
        for item in self.items:
            item.reconstruct(cg)
        cg.append("BUILD_TUPLE", len(self.items))
        cg.append("PRECALL", 2)
        cg.append("CALL", 2)


class _NamedTupleMethod(Value):
    """``nt._replace(**changes)`` (a new tuple of the same class) and ``nt._asdict()`` (a dict of the fields)."""

    def __init__(self, owner: NamedTupleValue, name: str):
        self.owner = owner
        self.name = name

    def describe(self):
        return f"{self.owner.describe()}.{self.name}"

    def call(self, tx, args, kwargs):
        owner = self.owner
        if args:
            raise GraphBreak(f"{self.describe()}() takes keyword arguments only (TypeError at run time)")
        if self.name == "_asdict":
            if kwargs:
                raise GraphBreak(f"{self.describe()}() takes no arguments (TypeError at run time)")
            return DictValue(dict(zip(owner.fields, owner.items)))
        unknown = set(kwargs) - set(owner.fields)
        if unknown:
            raise GraphBreak(f"{self.describe()}(): unexpected field names {sorted(unknown)} (ValueError at run time)")
        return NamedTupleValue([kwargs.get(f, item) for f, item in zip(owner.fields, owner.items)], owner.cls)


#: ``list`` methods modelled on the items of a list subclass object made in the trace (its ``ListValue``).
_LIST_METHODS = frozenset({"append", "extend", "insert", "pop", "reverse", "clear", "index", "count", "copy"})
_LIST_SPECIALS = frozenset({"__getitem__", "__setitem__", "__len__", "__iter__", "__contains__", "__init__"})


class ListStorage(ListValue):
    """The items of a list subclass object made in the trace: changing them changes the object."""

    def __init__(self, owner: "NewListObjectValue"):
        super().__init__([])
        self.owner = owner

    def describe(self):
        return f"the items of {self.owner.describe()}"

    def is_constant(self):
        return False

    def mutate(self, tx, what: str = "") -> None:
        self.mutated = True
        self.owner._changed(tx)

    def reconstruct(self, cg):
        self.owner.reconstruct(cg)


class _ListSpecial(Value):
    """A special method of ``list`` (``__getitem__``, ``__len__``, ``__init__``...) bound to the items."""

    def __init__(self, owner: "NewListObjectValue", name: str):
        self.owner = owner
        self.name = name

    def describe(self):
        return f"list.{self.name} of {self.owner.describe()}"

    def call(self, tx, args, kwargs):
        from .objects import all_items
        from .operators import contains_op

        items, name = self.owner.storage, self.name
        arity = {"__getitem__": 1, "__setitem__": 2, "__len__": 0, "__iter__": 0, "__contains__": 1}.get(name)
        if kwargs or arity is not None and len(args) != arity or name == "__init__" and len(args) > 1:
            raise GraphBreak(f"{self.describe()} with these arguments (TypeError at run time)")
        if name == "__getitem__":
            return items.getitem(tx, args[0])
        if name == "__setitem__":
            items.setitem(tx, args[0], args[1])
            return ConstantValue(None)
        if name == "__len__":
            return ConstantValue(len(items.items))
        if name == "__iter__":
            from .live_iterators import ListIteratorValue

            return ListIteratorValue(items)
        if name == "__contains__":
            return ConstantValue(contains_op(tx, args[0], items))
        new = all_items(tx, args[0]) if args else []  # list.__init__: the items replaced
        items.mutate(tx)
        items.items = new
        return ConstantValue(None)


class NewListObjectValue(NewObjectValue):
    """An object of a user subclass of ``list`` made in the trace: its attributes and its items."""

    def __init__(self, cls: type, class_source, born_in: tuple):
        super().__init__(cls, class_source, born_in, placeholder=list.__new__(cls))
        self.storage = ListStorage(self)

    def base_method(self, tx, name: str) -> Value | None:
        from .container_methods import ContainerMethodValue

        if name in _LIST_METHODS:
            return ContainerMethodValue(self.storage, name)
        if name in _LIST_SPECIALS:
            return _ListSpecial(self, name)
        return None

    def init_base(self, tx, args, kwargs) -> None:
        _ListSpecial(self, "__init__").call(tx, args, kwargs)

    def iterator(self, tx) -> Value | None:
        """``iter(obj)`` with ``list.__iter__``: the live iterator of the items (it sees later appends)."""
        if builtin_owner(type(self.obj), "__iter__") is None:
            return super().iterator(tx)
        from .live_iterators import ListIteratorValue

        return ListIteratorValue(self.storage)

    def reconstruct(self, cg) -> None:
        """``list.__new__(cls)``, ``list.extend(obj, [items])``, then its ``__dict__`` entries."""
        if cg.load_shared(self):
            return
        for child in [*self.storage.items, *self.attrs.values()]:
            if child.source is None and isinstance(child, (DictValue, ListValue, NewObjectValue)):
                cg.share(child)
        cg.append("PUSH_NULL")
        cg.load_const(list.__new__)
        cg.load_const(type(self.obj))
        cg.append("PRECALL", 1)
        cg.append("CALL", 1)
        cg.keep_shared(self)
        cg.append("PUSH_NULL")
        cg.load_const(list.extend)
        cg.load_shared(self)
        for item in self.storage.items:
            item.reconstruct(cg)
        cg.append("BUILD_LIST", len(self.storage.items))
        cg.append("PRECALL", 2)
        cg.append("CALL", 2)
        cg.append("POP_TOP")
        self.fill_attributes(cg)
        cg.load_shared(self)
