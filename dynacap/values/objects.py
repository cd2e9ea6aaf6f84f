"""``ObjectValue``: any other Python object reached from the frame (configs, user classes).

An attribute read is traced as CPython performs it, and the engine's own
inspection never runs user code: objects are looked at through ``type(obj)``
and the class dictionaries along the MRO, never ``getattr``/``hasattr``/
``isinstance`` on the object.  A class's own ``__getattribute__`` (and
``__getattr__`` when the lookup fails) is inlined, exactly once per read, as
eager calls it; ``object.__getattribute__`` (``super().__getattribute__(k)``)
is the generic lookup: data descriptors of the class, then the instance
``__dict__``, then other class attributes.  Plain attributes are read at
capture time and guarded through their source, which reads past the class's
hooks (``object.__getattribute__(obj, name)``) where it has any; Python
methods are inlined with the object bound, properties are inlined, other
descriptors and effects are graph breaks.
"""
from __future__ import annotations

import collections
import collections.abc
import os
import types

from ..errors import GraphBreak
from ..regions import protected
from ..source import AttrSource, ClassSource, DictStorageSource, GenericAttrSource, Source
from .base import DELETED, Value
from .constant import ConstantValue
from .exceptions import AttributeMissing, missing_attribute_message  # AttributeMissing re-exported

_MISSING = object()
_OBJECT_CLASS = object.__dict__["__class__"]


def class_lookup(cls: type, name: str):
    """The attribute ``name`` found in the class dictionaries along ``cls``'s MRO (``_PyType_Lookup``)."""
    for klass in type.__dict__["__mro__"].__get__(cls):
        d = type.__dict__["__dict__"].__get__(klass)
        if name in d:
            return d[name]
    return _MISSING


def lookup_hook(cls: type, name: str):
    """The class's own ``__getattribute__``/``__getattr__``/``__setattr__``, or None where it is CPython's."""
    attr = class_lookup(cls, name)
    if attr is _MISSING or type(attr) is types.WrapperDescriptorType:
        return None
    return attr


def has_lookup_hooks(cls: type) -> bool:
    """Whether reading an attribute of a ``cls`` instance may run Python code of the class itself.

    A ``__class__`` of its own counts: ``isinstance`` reads it.
    """
    return (lookup_hook(cls, "__getattribute__") is not None or lookup_hook(cls, "__getattr__") is not None
            or class_lookup(cls, "__class__") is not _OBJECT_CLASS)


def instance_dict(obj) -> dict | None:
    """``obj.__dict__`` read without the class's hooks, or None if it has none."""
    if not type(obj).__dictoffset__:
        return None
    try:
        d = object.__getattribute__(obj, "__dict__")
    except AttributeError:
        return None
    return d if type(d) is dict else None


def _is_data_descriptor(attr) -> bool:
    t = type(attr)
    return class_lookup(t, "__set__") is not _MISSING or class_lookup(t, "__delete__") is not _MISSING


def attribute_source(value: Value, obj, name: str) -> Source | None:
    """Where ``obj.<name>`` (found by the generic lookup) is read from at run time and in guards."""
    if value.source is None:
        # An object made while capturing has no instance attribute but those it wrote: what the lookup
        # finds elsewhere is its class's, read (and guarded) as ``Cls.<name>``.
        class_source = getattr(value, "class_source", None)
        return AttrSource(class_source, name) if class_source is not None else None
    if has_lookup_hooks(type(obj)):
        return GenericAttrSource(value.source, name)
    return AttrSource(value.source, name)


def _dict_expr(obj) -> str:
    """A guard expression for the instance dict of the object at ``{s}`` that runs no user code."""
    return "object.__getattribute__({s}, '__dict__')" if has_lookup_hooks(type(obj)) else "{s}.__dict__"


class ObjectValue(Value):
    #: Where the class of an object made while capturing is read from (``instances.NewObjectValue``).
    class_source: Source | None = None

    def __init__(self, obj, source=None):
        self.obj = obj
        self.source = source
        #: False when only the type is guarded (the runtime object may be another instance).
        self.identity_known = True

    def describe(self):
        where = f" {readable(self.source)}" if self.source is not None else ""
        return f"{type(self.obj).__name__} object{where}"

    def python_type(self):
        return type(self.obj)

    def real_object(self):
        if not self.identity_known:
            raise GraphBreak(f"{self.describe()} is a different object on each call (only its type is guarded)")
        return self.obj

    def written_attribute(self, tx, name: str) -> Value | None:
        """What the trace wrote into ``obj.<name>`` (``DELETED`` if it deleted it), None if nothing."""
        return tx.attribute_override(self.obj, name)

    def getattr(self, tx, name):
        cls = type(self.obj)
        hook = lookup_hook(cls, "__getattribute__")
        try:
            if hook is None:
                return generic_getattr(tx, self, name)
            return self._run_hook(tx, "__getattribute__", hook, name)
        except AttributeMissing as e:
            fallback = lookup_hook(cls, "__getattr__")
            if fallback is None or e.frames:
                raise
            return self._run_hook(tx, "__getattr__", fallback, name)

    def _run_hook(self, tx, hook_name: str, hook, name: str) -> Value:
        """Inline the class's ``__getattribute__``/``__getattr__`` for ``name``, as eager calls it."""
        if type(hook) is not types.FunctionType:
            raise GraphBreak(f"attribute `{name}` of {self.describe()} comes from a custom {hook_name} "
                             f"({type(hook).__name__})")
        return self.call_special(tx, hook_name, [ConstantValue(name)], f"attribute `{name}`")

    def call_special(self, tx, name: str, args: list[Value], what: str) -> Value:
        """``type(obj).<name>(obj, *args)``: a special method written in Python, inlined (``what`` it serves).

        An ``AttributeError`` leaving it uncaught is the caller's to handle (``escaped``).
        """
        from .functions import UserFunctionValue

        method = class_lookup(type(self.obj), name)
        model = _MIXIN_MODELS.get(method)
        if model is not None:
            return model(tx, self, args)
        if type(method) in _BUILTIN_METHOD_TYPES:
            bound = self.base_method(tx, name)
            if bound is not None:
                guard_class_attribute(tx, self, self.obj, name, method)
                return bound.call(tx, args, {})
        if type(method) is not types.FunctionType:
            kind = "no" if method is _MISSING else f"a built-in ({type(method).__name__})"
            raise GraphBreak(f"{what} on {self.describe()}, whose class has {kind} {name}")
        guard_class_attribute(tx, self, self.obj, name, method)
        calling, tx.calling = tx.calling, False  # its result is not a CALL's
        try:
            return UserFunctionValue(modelled_function(method)).call(tx, [self, *args], {})
        except AttributeMissing as e:
            raise escaped(e) from None
        finally:
            tx.calling = calling

    def base_method(self, tx, name: str) -> Value | None:
        """``name`` of the object's built-in ``dict`` base, bound to its items (reading only), ``write`` of a
        frame ``io.StringIO`` (``builtins.printing``), or None."""
        from .builtins.printing import stream_method
        from .subclasses import base_method, builtin_owner, dict_base, frame_items

        stream = stream_method(self, name)
        if stream is not None:
            return stream

        if self.source is None or dict_base(type(self.obj)) is None or builtin_owner(type(self.obj), name) is None:
            return None
        return base_method(tx, self, name, frame_items(tx, self), writable=False)

    def getitem(self, tx, index):
        found = environment_variable(tx, self, index)
        if found is not None:
            if found is _MISSING:
                raise GraphBreak(f"environment variable {index.as_constant()!r} is not set (KeyError at run time)")
            return ConstantValue(found)
        return self.call_special(tx, "__getitem__", [index], "indexing")

    def setitem(self, tx, index, value):
        self.call_special(tx, "__setitem__", [index, value], "item assignment")

    def iterator(self, tx) -> Value | None:
        """``iter(obj)`` through the class's own ``__iter__`` (pulled lazily), or None where it has none.

        ``collections.abc.Sequence.__iter__`` is a model (``models.collections``) traced in its place.
        """
        from ..models import collections as models
        from .containers import IteratorValue
        from .functions import UserFunctionValue
        from .iterators import PullIterator

        method = class_lookup(type(self.obj), "__iter__")
        if method is collections.abc.Sequence.__iter__:
            guard_class_attribute(tx, self, self.obj, "__iter__", method)
            return UserFunctionValue(models.sequence_iter).call(tx, [self], {})
        if method is _MISSING:
            from .protocols import old_sequence_iterator

            return old_sequence_iterator(tx, self)  # ``obj[0]``, ``obj[1]``... (None without __getitem__)
        if type(method) is not types.FunctionType:
            return None
        made = self.call_special(tx, "__iter__", [], "iteration")
        if not isinstance(made, (IteratorValue, PullIterator)):
            raise GraphBreak(f"iteration over {self.describe()}: its __iter__ returned {made.describe()}")
        return made

    def consume(self, tx) -> list[Value]:
        """Every item, for a consumer that takes them all before doing anything else (``list(obj)``,
        unpacking): the class's own ``__iter__`` pulled to the end."""
        iterator = self.iterator(tx)
        if iterator is None:
            return self.iterate(tx)
        items = []
        while (item := iterator.next_item(tx)) is not None:
            items.append(item)
        return items

    def iterate(self, tx):
        """``iter(obj)`` where it is the built-in base's (a dict subclass: its keys)."""
        if type(class_lookup(type(self.obj), "__iter__")) in _BUILTIN_METHOD_TYPES:
            bound = self.base_method(tx, "__iter__")
            if bound is not None:
                return bound.call(tx, [], {}).iterate(tx)
        from .containers import IteratorValue

        iterator = self.iterator(tx)
        if iterator is None:
            return super().iterate(tx)
        if not isinstance(iterator, IteratorValue):
            # Its items are made by code that may interleave with the consumer's (a ``for`` body):
            # only a lazy pull (``iterators.iterator_of``) keeps eager's order.
            raise GraphBreak(f"iterating over {self.describe()}, whose __iter__ makes its items one by one")
        return iterator.iterate(tx)

    def call(self, tx, args, kwargs):
        """``obj(*args)``: the class's ``__call__``, inlined with the object bound (its result is the CALL's)."""
        from .functions import UserFunctionValue

        method = class_lookup(type(self.obj), "__call__")
        if type(method) is not types.FunctionType:
            kind = "no" if method is _MISSING else f"a built-in ({type(method).__name__})"
            raise GraphBreak(f"calling {self.describe()}, whose class has {kind} __call__")
        guard_class_attribute(tx, self, self.obj, "__call__", method)
        return UserFunctionValue(method).call(tx, [self, *args], kwargs)

    def contains(self, tx, item) -> Value:
        """``item in obj``: the class's ``__contains__`` (``Mapping``'s goes through ``__getitem__``).

        A set's or dict's own (a ``set``, a ``dict`` subclass) is answered now, for a constant item, and
        guarded by the answer alone.
        """
        method = class_lookup(type(self.obj), "__contains__")
        if method in _BUILTIN_CONTAINS and item.is_constant() and self.source is not None:
            key = item.as_constant()
            try:
                result = method(self.obj, key)
            except TypeError as e:
                raise GraphBreak(f"`in` over {self.describe()}: {e} (TypeError at run time)") from None
            tx.guards.add("EQUALS_MATCH", self.source, f"{{m}}({{s}}, {{k}}) is {result}",
                          f"({key!r} in {readable(self.source)}) is {result}", m=method, k=key)
            return ConstantValue(result)
        if method is _MISSING:
            from .protocols import contains_by_iteration

            found = contains_by_iteration(tx, item, self)
            if found is not None:
                return ConstantValue(found)
        return self.call_special(tx, "__contains__", [item], "`in`")

    def setattr(self, tx, name, value):
        if lookup_hook(type(self.obj), "__setattr__") is not None:
            raise GraphBreak(f"assigning `.{name}` on {self.describe()}, whose class has its own __setattr__")
        self.store(tx, name, value)

    def store(self, tx, name: str, value: Value) -> None:
        """``object.__setattr__(obj, name, value)``: the generic store, past the class's own ``__setattr__``."""
        attr = class_lookup(type(self.obj), name)
        if attr is not _MISSING and _is_data_descriptor(attr):
            # A property's setter (or a descriptor's __set__) decides what a later read gives.
            from .descriptor_protocol import set_through_descriptor

            set_through_descriptor(tx, self, name, attr, value)
            return
        tx.record_setattr(self, name, value)

    def truth(self, tx):
        """``bool(obj)``: the class's ``__bool__``, else its ``__len__``, inlined; True without either."""
        cls = type(self.obj)
        for name in ("__bool__", "__len__"):
            if class_lookup(cls, name) is _MISSING:
                continue
            result = self.call_special(tx, name, [], "truth value")
            value = result.as_constant() if result.is_constant() else None
            if name == "__bool__" and type(value) is bool:
                return value
            if name == "__len__" and type(value) in (int, bool) and value >= 0:
                return bool(value)
            raise GraphBreak(f"truth value of {self.describe()}: its {name} gave {result.describe()}")
        return True


def modelled_function(function):
    """The Python model traced in place of a standard-library method (``Counter.update``), else ``function``."""
    if not _STDLIB_MODELS:
        from ..models import collections as models

        _STDLIB_MODELS.update({
            collections.Counter.__init__: models.counter_init, collections.Counter.update: models.counter_update,
            collections.Counter.__missing__: models.counter_missing,
            collections.Counter.most_common: models.counter_most_common,
            collections.Counter.total: models.counter_total})
    return _STDLIB_MODELS.get(function, function)


#: Standard-library methods (skipped files) -> their models in ``dynacap.models``, filled on first use.
_STDLIB_MODELS: dict = {}


def all_items(tx, value: Value) -> list[Value]:
    """``value``'s items for a consumer that takes them all at once (``list(v)``, ``[*v]``, unpacking)."""
    from .iterators import PullIterator

    if isinstance(value, ObjectValue):
        return value.consume(tx)
    return value.take_all(tx) if isinstance(value, PullIterator) else value.iterate(tx)


def escaped(e: AttributeMissing) -> AttributeMissing:
    """``e`` raised inside inlined frames (a lookup hook, a getter, what they call), seen by their caller.

    When no frame on the way catches it (no exception-table entry covers the instruction, no generator),
    the ``AttributeError`` leaves them all as it does in eager: the result is a fresh, direct
    ``AttributeMissing``.  Otherwise ``e`` itself, a graph break.
    """
    import inspect

    for frame in e.frames:
        code = frame.tracer.code
        if code.co_flags & inspect.CO_GENERATOR or protected(code, frame.instruction.offset):
            return e
    return AttributeMissing(e.reason, e.exception, reraise=e.reraise)


def environment_variable(tx, value: "ObjectValue", key: Value):
    """``os.environ.get(key)`` read now (``os``'s own code, no user code) and guarded by its answer; the
    value, or ``_MISSING``.  None when ``value`` is not ``os.environ`` read from the frame."""
    if type(value.obj) is not os._Environ or value.source is None or not key.is_constant() \
            or type(key.as_constant()) is not str:
        return None
    name = key.as_constant()
    found = value.obj.get(name, _MISSING)
    if found is _MISSING:
        tx.guards.add("EQUALS_MATCH", value.source, "{g}({s}, {k}, {m}) is {m}",
                      f"{name!r} not in {readable(value.source)}", g=collections.abc.Mapping.get, k=name, m=_MISSING)
    else:
        tx.guards.add("EQUALS_MATCH", value.source, "{g}({s}, {k}, {m}) == {v}",
                      f"{readable(value.source)}[{name!r}] == {found!r}", g=collections.abc.Mapping.get, k=name,
                      m=_MISSING, v=found)
    return found


def _mapping_contains(tx, value: "ObjectValue", args: list[Value]) -> Value:
    """``Mapping.__contains__``: ``self[key]`` succeeds (a missing key, a ``KeyError``, is a break)."""
    if len(args) != 1:
        raise GraphBreak("Mapping.__contains__ takes one argument (TypeError at run time)")
    found = environment_variable(tx, value, args[0])
    if found is not None:
        return ConstantValue(found is not _MISSING)
    value.getitem(tx, args[0])
    return ConstantValue(True)


def _mapping_get(tx, value: "ObjectValue", args: list[Value]) -> Value:
    """``Mapping.get``: ``self[key]`` (a missing key, a ``KeyError``, is a break)."""
    if len(args) not in (1, 2):
        raise GraphBreak("Mapping.get takes one or two arguments (TypeError at run time)")
    found = environment_variable(tx, value, args[0])
    if found is not None:
        return ConstantValue(found) if found is not _MISSING else args[1] if len(args) > 1 else ConstantValue(None)
    return value.getitem(tx, args[0])


#: ``collections.abc`` mixin methods (stdlib code, never inlined) modelled on the class's own methods.
_MIXIN_MODELS = {collections.abc.Mapping.__contains__: _mapping_contains,
                 collections.abc.Mapping.get: _mapping_get}


def modelled_method(function, value: Value) -> Value | None:
    """``function`` bound to ``value`` when it is a modelled mixin method (``Mapping.get``), else None."""
    handler = _MIXIN_MODELS.get(function)
    if handler is None or not isinstance(value, ObjectValue):
        return None
    return _ModelledMethod(handler, value, function.__qualname__)


class _ModelledMethod(Value):
    """A mixin method bound to an object, modelled by ``handler(tx, value, args)``."""

    def __init__(self, handler, self_value: Value, label: str):
        self.handler = handler
        self.self_value = self_value
        self.label = label

    def describe(self):
        return f"method {self.label}"

    def call(self, tx, args, kwargs):
        if kwargs:
            raise GraphBreak(f"{self.label}() with keyword arguments")
        return self.handler(tx, self.self_value, args)


#: How CPython's own methods of built-in classes (``dict.keys``, ``dict.__len__``) appear in class dicts.
_BUILTIN_METHOD_TYPES = (types.MethodDescriptorType, types.WrapperDescriptorType)
#: CPython's own membership tests: they run no user code for a constant key.
_BUILTIN_CONTAINS = {set.__contains__, frozenset.__contains__, dict.__contains__}


def builtin_dict_get(tx, value: "ObjectValue", args: list[Value]) -> Value:
    """``dict.get(obj, key[, default])`` on a ``dict`` subclass (``super().get(k)``), past its overrides."""
    from .wrap import wrap

    if len(args) not in (1, 2) or not args[0].is_constant() or value.source is None:
        raise GraphBreak(f"dict.get on {value.describe()} with these arguments")
    key = args[0].as_constant()
    found = dict.get(value.obj, key, _MISSING)
    if found is _MISSING:
        tx.guards.add("NOT_PRESENT", value.source, "not {m}({s}, {k})",
                      f"{key!r} not in {readable(value.source)}", m=dict.__contains__, k=key)
        return args[1] if len(args) > 1 else ConstantValue(None)
    return wrap(tx, found, DictStorageSource(value.source, key))


def readable(source: Source) -> str:
    """A source as users write it: ``object.__getattribute__(L['c'], 'x')`` is ``c.x``."""
    if isinstance(source, GenericAttrSource):
        return f"{readable(source.base)}.{source.name}"
    return source.expr()


def generic_getattr(tx, value: ObjectValue, name: str) -> Value:
    """``object.__getattribute__(obj, name)`` traced: no hook of the class runs."""
    from .class_state import written_class_attribute
    from .functions import BoundMethodValue, UserFunctionValue
    from .wrap import wrap

    obj = value.obj
    cls = type(obj)
    override = value.written_attribute(tx, name)
    deleted = override is DELETED  # deleted by the trace: absent from the instance, with no guard
    if override is not None and not deleted:
        return override
    written = written_class_attribute(tx, cls, name)
    if written is not None:
        return _written_class_attribute(tx, value, name, written, deleted)
    cls_attr = class_lookup(cls, name)
    if cls_attr is not _MISSING and _is_data_descriptor(cls_attr):
        if deleted:
            raise GraphBreak(f"attribute `{name}` of {value.describe()} was deleted through a descriptor")
        return _data_descriptor(tx, value, name, cls_attr)
    d = instance_dict(obj)
    if d is not None and name in d and not deleted:
        return wrap(tx, d[name], attribute_source(value, obj, name))
    if cls_attr is _MISSING:
        if not deleted:
            guard_missing(tx, value, name)
        raise AttributeMissing(f"{value.describe()} has no attribute {name!r} (AttributeError at run time)",
                               message=missing_attribute_message(obj, name))
    if type(cls_attr) is types.FunctionType:
        guard_class_attribute(tx, value, obj, name, cls_attr)
        return modelled_method(cls_attr, value) or BoundMethodValue(UserFunctionValue(modelled_function(cls_attr)),
                                                                    value)
    if type(cls_attr) in _BUILTIN_METHOD_TYPES:
        bound = value.base_method(tx, name)  # ``self.keys()`` of a dict subclass
        if bound is not None:
            guard_class_attribute(tx, value, obj, name, cls_attr)
            return bound
    if isinstance(cls_attr, (staticmethod, classmethod)):
        return wrap(tx, cls_attr.__get__(obj, cls), attribute_source(value, obj, name))
    getter = class_lookup(type(cls_attr), "__get__")
    if type(getter) is types.FunctionType:
        # A descriptor written in Python (``lazy_property``): its ``__get__`` traced, as eager calls it.
        from .descriptor_protocol import get_through_descriptor

        return get_through_descriptor(tx, value, name, cls_attr, getter)
    if getter is not _MISSING:
        raise GraphBreak(f"attribute `{name}` of {value.describe()} is a {type(cls_attr).__name__} descriptor")
    return wrap(tx, cls_attr, attribute_source(value, obj, name))


def _written_class_attribute(tx, value: ObjectValue, name: str, written: Value, deleted: bool) -> Value:
    """``obj.<name>`` where the trace assigned ``name`` on its class (``Cls.name = v``): the instance's own
    entry first (the value assigned is no data descriptor), then the value, a function bound to ``obj``."""
    from .functions import BoundMethodValue, UserFunctionValue
    from .wrap import wrap

    if written is DELETED or isinstance(written, ObjectValue) and class_lookup(type(written.obj), "__get__") \
            is not _MISSING:
        raise GraphBreak(f"attribute `{name}` of {value.describe()}: the captured code changed it on the class "
                         f"to {written.describe()}")
    d = instance_dict(value.obj)
    if d is not None and name in d and not deleted:
        return wrap(tx, d[name], attribute_source(value, value.obj, name))
    if isinstance(written, UserFunctionValue):
        return BoundMethodValue(written, value)
    return written


def _data_descriptor(tx, value: ObjectValue, name: str, attr) -> Value:
    """A property, a slot or ``__dict__`` of the class: what ``attr.__get__(obj, cls)`` gives."""
    from .functions import UserFunctionValue
    from .wrap import wrap

    obj = value.obj
    if type(attr) is property:
        if attr.fget is None:
            raise GraphBreak(f"property `{name}` of {value.describe()} has no getter (AttributeError at run time)")
        guard_class_attribute(tx, value, obj, name, attr)
        calling, tx.calling = tx.calling, False  # the getter's result is not a CALL's
        try:
            return UserFunctionValue(attr.fget).call(tx, [value], {})
        except AttributeMissing as e:
            raise escaped(e) from None
        finally:
            tx.calling = calling
    if type(attr) in (types.GetSetDescriptorType, types.MemberDescriptorType):
        # CPython's own descriptors (``__dict__``, ``__class__``, ``__slots__`` members) run no user code.
        if name == "__class__":
            return wrap(tx, type(obj), None)  # covered by the type guard on the object
        if name == "__dict__" and value.class_source is not None:
            from .instance_dicts import NewInstanceDictValue

            return NewInstanceDictValue(value)
        if name == "__dict__" and value.source is not None:
            from .instance_dicts import InstanceDictValue

            return InstanceDictValue(value)
        try:
            result = attr.__get__(obj, type(obj))
        except AttributeError:
            raise GraphBreak(f"slot `{name}` of {value.describe()} is not set (AttributeError at run time)") \
                from None
        return wrap(tx, result, attribute_source(value, obj, name))
    getter = class_lookup(type(attr), "__get__")
    if type(getter) is types.FunctionType:
        from .descriptor_protocol import get_through_descriptor

        return get_through_descriptor(tx, value, name, attr, getter)
    raise GraphBreak(f"attribute `{name}` of {value.describe()} is a {type(attr).__name__} descriptor")


def guard_missing(tx, value: Value, name: str) -> None:
    """Guard that ``name`` stays absent from the object (its instance dict and its class)."""
    source = value.source
    if source is None:
        return
    obj = value.obj
    check = "not hasattr(type({s}), " + repr(name) + ")"
    if instance_dict(obj) is not None:
        check = f"{name!r} not in {_dict_expr(obj)} and {check}"
    tx.guards.add("NOT_PRESENT", source, check, f"{readable(source)} has no attribute {name!r}")


class GenericGetattrValue(Value):
    """``object.__getattribute__`` (``super().__getattribute__`` bound to ``self`` when ``bound`` is set)."""

    def __init__(self, bound: Value | None = None):
        self.bound = bound

    def describe(self):
        return "object.__getattribute__"

    def call(self, tx, args, kwargs):
        if self.bound is not None:
            args = [self.bound, *args]
        if kwargs or len(args) != 2:
            raise GraphBreak(f"{self.describe()} takes two arguments (TypeError at run time)")
        target, name = args
        if not isinstance(target, ObjectValue) or type(name.as_constant()) is not str:
            raise GraphBreak(f"{self.describe()} on {target.describe()}")
        return generic_getattr(tx, target, name.as_constant())

    def reconstruct(self, cg) -> None:
        if self.bound is None:
            cg.load_const(object.__getattribute__)
            return
        cg.call(types.MethodType, object.__getattribute__, self.bound)


class GenericSetattrValue(Value):
    """``object.__setattr__`` (``super().__setattr__`` bound to ``self`` when ``bound`` is set).

    The store a class's own ``__setattr__`` ends with, and what a frozen dataclass's ``__init__`` uses.
    """

    def __init__(self, bound: Value | None = None):
        self.bound = bound

    def describe(self):
        return "object.__setattr__"

    def call(self, tx, args, kwargs):
        if self.bound is not None:
            args = [self.bound, *args]
        if kwargs or len(args) != 3:
            raise GraphBreak(f"{self.describe()} takes three arguments (TypeError at run time)")
        target, name, value = args
        if not isinstance(target, ObjectValue) or not name.is_constant() or type(name.as_constant()) is not str:
            raise GraphBreak(f"{self.describe()} on {target.describe()}")
        target.store(tx, name.as_constant(), value)
        return ConstantValue(None)

    def reconstruct(self, cg) -> None:
        if self.bound is None:
            cg.load_const(object.__setattr__)
            return
        cg.append("PUSH_NULL")
        cg.load_const(types.MethodType)
        cg.load_const(object.__setattr__)
        self.bound.reconstruct(cg)
        cg.append("PRECALL", 2)
        cg.append("CALL", 2)


def guard_class_attribute(tx, value: Value, obj, name: str, attr) -> None:
    """``obj.<name>`` resolved to the class attribute ``attr`` (a method, property or lookup hook).

    Guard that the class still holds ``attr`` and that the instance does not
    shadow it, so that patching either (``obj.run = ...``, ``Cls.run = ...``)
    recompiles instead of inlining the old code.  Dunder hooks are looked up
    on the type only: the instance cannot shadow them.
    """
    source = value.source
    label = getattr(attr, "__qualname__", None) or getattr(getattr(attr, "fget", None), "__qualname__", name)
    if source is None:
        class_source = getattr(value, "class_source", None)
        if class_source is not None:
            # An object made while capturing: no instance to shadow it, only its class to patch.
            # ``Cls.<name>`` is the attribute itself for functions and properties (unless the metaclass
            # has a data descriptor of that name); other kinds are read from the class dictionaries.
            where = type(obj).__qualname__ if isinstance(class_source, ClassSource) else readable(class_source)
            description = f"{where}.{name} is {label}"
            if type(attr) in (types.FunctionType, property) and name.isidentifier() \
                    and not _is_data_descriptor(class_lookup(type(type(obj)), name)):
                tx.guards.add("ID_MATCH", class_source, f"{{s}}.{name} is {{attr}}", description, attr=attr)
            else:
                tx.guards.add("ID_MATCH", class_source, f"{{lookup}}({{s}}, {name!r}) is {{attr}}", description,
                              lookup=class_lookup, attr=attr)
        return
    if not name.isidentifier():
        raise GraphBreak(f"attribute {name!r} of {value.describe()} is not an identifier")
    if not (name.startswith("__") and name.endswith("__")) and instance_dict(obj) is not None:
        tx.guards.add("NOT_PRESENT", source, f"{name!r} not in {_dict_expr(obj)}",
                      f"{name!r} not in {readable(source)}.__dict__")
    description = f"type({readable(source)}).{name} is {label}"
    metaclass_attr = class_lookup(type(type(obj)), name)
    if metaclass_attr is not _MISSING and _is_data_descriptor(metaclass_attr) \
            or not isinstance(attr, (types.FunctionType, property)):
        # ``type(obj).__class__`` is the metaclass's, and ``type(obj).<static>`` is what the descriptor
        # gives (a function, a new bound method): read the class dictionaries instead.
        tx.guards.add("ID_MATCH", source, f"{{lookup}}(type({{s}}), {name!r}) is {{attr}}", description,
                      lookup=class_lookup, attr=attr)
        return
    tx.guards.add("ID_MATCH", source, f"type({{s}}).{name} is {{attr}}", description, attr=attr)
