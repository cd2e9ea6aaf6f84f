"""``NewObjectValue``: an instance of a user class made by the captured code (``p = P(x)``).

Calling a plain Python class (a metaclass without its own ``__call__``,
``object.__new__``, no ``__getattribute__``/``__delattr__``, no ``__slots__``,
no built-in or torch base class but ``dict``/``OrderedDict``/``list``, whose
objects are ``subclasses.NewDictObjectValue``/``NewListObjectValue``) is traced
as CPython runs it: a new instance, then the class's ``__init__`` inlined as
user code; its own ``__setattr__``/``__getattr__`` are inlined where eager
calls them.  Named tuples and enum members are values of their own
(``subclasses``, ``enums``).  A placeholder made by ``object.__new__(cls)`` (which runs no user
code) stands for the instance's class while tracing; the attributes the trace
writes are kept by the value, in order, so reads after writes see them, and
methods, properties and class attributes are found through the MRO as for
``ObjectValue`` (guarded through the class: ``Cls.<name>``).  An object that
never leaves the trace needs nothing at run time.  One that escapes (returned,
stored into a frame object, a global or a list, live across a graph break) is
built once by the rewritten code: ``object.__new__(cls)`` and its ``__dict__``
entries, without running ``__init__`` again (its effects on other objects are
replayed as side effects) nor any ``__setattr__``.  The placeholder never
reaches the graph, guards or rewritten code.
"""
from __future__ import annotations

import abc
import enum
import types

from .. import trace_rules
from ..errors import GraphBreak
from ..source import AttrSource, ClassSource
from .base import Value
from .constant import ConstantValue
from .objects import _MISSING, _OBJECT_CLASS, ObjectValue, _is_data_descriptor, class_lookup, has_lookup_hooks, \
    lookup_hook

_OBJECT_NEW = object.__dict__["__new__"]
_OBJECT_INIT = object.__dict__["__init__"]
_TYPE_CALL = type.__dict__["__call__"]
_HEAP_TYPE = 1 << 9  # Py_TPFLAGS_HEAPTYPE: a class made by a ``class`` statement
_ABSTRACT = 1 << 20  # Py_TPFLAGS_IS_ABSTRACT: abstract methods left (``object.__new__`` raises)
#: Metaclasses whose ``__call__`` is ``type.__call__`` (``__new__`` then ``__init__``).
_PLAIN_METACLASSES = (type, abc.ABCMeta)


def why_not_plain(cls: type) -> str | None:
    """What stops creating a ``cls`` instance in the trace, in words (None: nothing)."""
    from .subclasses import container_base

    if type(cls) not in _PLAIN_METACLASSES:
        meta = type(cls)
        if class_lookup(meta, "__call__") is not _TYPE_CALL:
            return f"its metaclass {meta.__qualname__} has its own __call__"
        if lookup_hook(meta, "__getattribute__") is not None or lookup_hook(meta, "__getattr__") is not None:
            # Guards read the class's attributes (``Cls.__init__``): they would run the metaclass's hooks.
            return f"its metaclass {meta.__qualname__} has its own attribute lookup"
    if cls.__flags__ & _ABSTRACT:
        return "it has abstract methods (TypeError at run time)"
    base = container_base(cls)
    for klass in type.__dict__["__mro__"].__get__(cls)[:-1]:
        if not klass.__flags__ & _HEAP_TYPE:
            if base is not None:
                continue  # a dict, OrderedDict or list subclass: its items are a container of the trace
            return f"it derives from the built-in class {klass.__qualname__}"
        if str(klass.__module__).split(".")[0] == "torch" and not _traced_torch_class(klass):
            return f"it derives from {klass.__module__}.{klass.__qualname__}"
    for hook in ("__getattribute__", "__getattr__", "__setattr__", "__delattr__"):
        hook_function = lookup_hook(cls, hook)
        if hook_function is None or _frozen_dataclass_hook(cls, hook):
            continue
        if hook in ("__getattribute__", "__getattr__", "__setattr__") and type(hook_function) is types.FunctionType:
            continue  # inlined where eager calls it; rebuilding the object calls none of them
        return f"it has its own {hook}"
    if class_lookup(cls, "__class__") is not _OBJECT_CLASS:
        return "it has its own __class__"
    if class_lookup(cls, "__del__") is not _MISSING:
        return "it has a __del__ method (run when the object dies)"
    if class_lookup(cls, "__new__") is not (_OBJECT_NEW if base is None else class_lookup(base, "__new__")) \
            and (base is not None or _python_new(cls) is None):
        return "it has its own __new__"
    init = class_lookup(cls, "__init__")
    if init is not _OBJECT_INIT and type(init) is not types.FunctionType \
            and (base is None or init is not class_lookup(base, "__init__")):
        return f"its __init__ is a {type(init).__name__}"
    return None


def _is_slot(cls: type, attr) -> bool:
    """Whether ``attr`` (found on ``cls``) is a ``__slots__`` member of one of its classes."""
    return type(attr) is types.MemberDescriptorType \
        and getattr(attr, "__objclass__", None) in type.__dict__["__mro__"].__get__(cls)


def _traced_torch_class(cls: type) -> bool:
    """A class of torch's Python that its trace rule says is traced (``torch.distributions``).

    Modules are not: they are made by ``values.module`` (their parameters are state of their own).
    """
    import torch

    if issubclass(cls, torch.nn.Module):
        return False
    rule = trace_rules.lookup(f"{cls.__module__}.{cls.__qualname__}")
    return rule is not None and rule.rule is trace_rules.Rule.INLINE


def _frozen_dataclass_hook(cls: type, name: str) -> bool:
    """Whether ``cls``'s ``__setattr__``/``__delattr__`` is the one ``@dataclass(frozen=True)`` generates.

    It raises ``FrozenInstanceError`` (a plain store is then a break), and the generated ``__init__``
    stores past it with ``object.__setattr__`` (``objects.GenericSetattrValue``).
    """
    for klass in type.__dict__["__mro__"].__get__(cls):
        own = type.__dict__["__dict__"].__get__(klass)
        if name in own:
            hook, params = own[name], own.get("__dataclass_params__")
            return getattr(params, "frozen", False) is True and type(hook) is types.FunctionType \
                and hook.__code__.co_filename == "<string>" and hook.__qualname__ == f"{klass.__qualname__}.{name}"
    return False


def _frozen_store(tx, target: Value, name: str, value: Value) -> None:
    """``obj.name = value`` through the ``__setattr__`` of ``@dataclass(frozen=True)``, as it runs: on an
    instance of the frozen class itself or on one of its fields, ``FrozenInstanceError`` (catchable);
    else the generic store (``super(cls, self).__setattr__``)."""
    import dataclasses

    cls = type(target.obj)
    frozen = next(k for k in type.__dict__["__mro__"].__get__(cls) if "__setattr__" in k.__dict__)
    fields = [f.name for f in frozen.__dict__["__dataclass_fields__"].values()
              if f._field_type is dataclasses._FIELD]
    if cls is frozen or name in fields:
        from .exceptions import python_error

        raise python_error(dataclasses.FrozenInstanceError, f"cannot assign to field {name!r}",
                           reason=f"assigning `.{name}` on {target.describe()}, a frozen dataclass "
                                  "(FrozenInstanceError at run time)")
    target.store(tx, name, value)


class _Instantiation:
    """One ``cls(...)`` being traced: the trace's mutation count when it began, and how many of the
    mutations since were writes to objects it made (``NewObjectValue.setattr``)."""

    def __init__(self, mutations: int):
        self.start = mutations
        self.fresh = 0
        self.open = True


#: id(TraceContext) -> the instantiations being traced in it, outermost first.
_OPEN: dict[int, list[_Instantiation]] = {}


def instantiate(tx, cls_value: Value, args: list[Value], kwargs: dict[str, Value]) -> Value:
    """``cls(*args, **kwargs)`` for a plain user class: a new object, its ``__init__`` inlined."""
    from .subclasses import make_namedtuple, make_tuple_object, namedtuple_fields, plain_tuple_class

    from .class_factories import class_factory
    from .classes import MadeClassValue

    cls = cls_value.as_constant()
    made_here = class_factory(tx, cls, args, kwargs)
    if made_here is not None:
        return made_here
    if namedtuple_fields(cls) is not None:
        return make_namedtuple(tx, cls_value, args, kwargs)
    if plain_tuple_class(cls):
        return make_tuple_object(tx, cls_value, args, kwargs)  # ``class Pair(tuple)``: a tuple value of the class
    if issubclass(type(cls), enum.EnumMeta) and len(args) == 1 and not kwargs \
            and type.__dict__["__dict__"].__get__(cls).get("_member_map_"):
        from .enums import lookup_member

        return lookup_member(cls, args[0], by_name=False)  # ``Color(2)``: the member of that value
    why = why_not_plain(cls)
    if why is not None:
        article = "an" if cls.__qualname__[:1].lower() in "aeiou" else "a"
        raise GraphBreak(f"creating {article} {cls.__qualname__} object in captured code: {why}")
    class_source = cls_value.source or ClassSource(cls)
    if _python_new(cls) is not None:
        return _instantiate_with_new(tx, cls_value, class_source, args, kwargs)
    made = cls_value if isinstance(cls_value, MadeClassValue) else None
    if made is not None and lookup_hook(cls, "__getattribute__") is not None:
        # ``object.__getattribute__`` inside it is the generic lookup of plain objects, not the namespace's.
        raise GraphBreak(f"creating a {cls.__qualname__} object in captured code: its class, made in captured "
                         "code, has its own __getattribute__")
    init = class_lookup(cls, "__init__")
    if init is _OBJECT_INIT:
        if args or kwargs:
            raise GraphBreak(f"{cls.__qualname__}() takes no arguments (TypeError at run time)")
        return _new_object(cls, class_source, tuple(_OPEN.get(id(tx.ctx), ())), made)
    if type(init) is not types.FunctionType:  # the dict base's own __init__
        if made is not None:
            raise GraphBreak(f"creating a {cls.__qualname__} object: its __init__ is a {type(init).__name__}")
        obj = _new_object(cls, class_source, tuple(_OPEN.get(id(tx.ctx), ())))
        obj.init_base(tx, args, kwargs)
        return obj
    result, obj = _recorded(tx, lambda born_in: _run_init(tx, cls_value, class_source, init, args, kwargs, born_in))
    if not (result.is_constant() and result.as_constant() is None):
        raise GraphBreak(f"{cls.__qualname__}.__init__ returned {result.describe()} "
                         "(TypeError at run time: __init__() should return None)")
    return obj


def _recorded(tx, create):
    """``create(born_in)`` as one instantiation: writes to the objects it makes are its own (``_Instantiation``)."""
    ctx = tx.ctx
    record = _Instantiation(ctx.mutations)
    stack = _OPEN.setdefault(id(ctx), [])
    stack.append(record)
    try:
        return create(tuple(stack))
    except GraphBreak:
        made = ctx.mutations - record.start
        if made == record.fresh:
            # Only objects this call made were changed.  A break inside ``__init__`` resumes before the
            # call at the latest (``__init__``'s result is not the CALL's: ``Tracer.direct_call``), where
            # none of them exists yet: nothing it could see has changed.
            ctx.mutations = record.start
            for outer in stack[:-1]:
                outer.fresh -= made
        raise
    finally:
        record.open = False
        stack.pop()
        if not stack:
            del _OPEN[id(ctx)]


def _python_new(cls: type):
    """The class's own ``__new__`` written in Python (None: ``object.__new__`` or a built-in one)."""
    new = class_lookup(cls, "__new__")
    function = new.__func__ if type(new) is staticmethod else new
    return function if type(function) is types.FunctionType else None


def _instantiate_with_new(tx, cls_value, class_source, args, kwargs) -> Value:
    """``type.__call__`` with the class's own ``__new__``: it is traced; ``__init__`` runs on what it
    returns only when that is an instance of the class (``type(obj).__init__``), as CPython does."""
    from .classes import MadeClassValue, MadeObjectValue, StaticMethodValue
    from .wrap import wrap

    cls = cls_value.as_constant()
    owner, new = cls_value.lookup("__new__") if isinstance(cls_value, MadeClassValue) else (None, None)
    if isinstance(owner, MadeClassValue):
        new_value = new.function if isinstance(new, StaticMethodValue) else new
    else:
        new_value = wrap(tx, _python_new(cls), AttrSource(class_source, "__new__"))  # ``Cls.__new__``: the function

    def create(born_in):
        calling, tx.calling = tx.calling, False  # __new__'s result is not the CALL's: __init__ may follow
        try:
            obj = new_value.call(tx, [cls_value, *args], kwargs)
        finally:
            tx.calling = calling
        if not isinstance(obj, NewObjectValue):
            if issubclass(obj.python_type(), cls):
                raise GraphBreak(f"{cls.__qualname__}.__new__ returned {obj.describe()}, whose __init__ would run")
            return obj
        made_cls = type(obj.obj)
        if not issubclass(made_cls, cls):
            return obj  # another class's object: no __init__ runs
        init = class_lookup(made_cls, "__init__")
        if init is _OBJECT_INIT:
            return obj
        if type(init) is not types.FunctionType:
            raise GraphBreak(f"creating a {cls.__qualname__} object: its __init__ is a {type(init).__name__}")
        obj_class = obj.class_value if isinstance(obj, MadeObjectValue) else cls_value \
            if made_cls is cls else ConstantValue(made_cls, obj.class_source)
        result, _ = _run_init(tx, obj_class, obj.class_source, init, args, kwargs, born_in, obj)
        if not (result.is_constant() and result.as_constant() is None):
            raise GraphBreak(f"{made_cls.__qualname__}.__init__ returned {result.describe()} "
                             "(TypeError at run time: __init__() should return None)")
        return obj

    return _recorded(tx, create)


class ObjectNewValue(Value):
    """``object.__new__`` (``super().__new__(cls)`` in a class's own ``__new__``): a new object of the trace."""

    def describe(self):
        return "object.__new__"

    def reconstruct(self, cg) -> None:
        cg.load_const(object.__new__)

    def call(self, tx, args, kwargs):
        from .classes import MadeClassValue

        if kwargs or len(args) != 1 or not args[0].is_constant() or not isinstance(args[0].as_constant(), type):
            raise GraphBreak("object.__new__ with arguments other than a class")
        cls_value = args[0]
        cls = cls_value.as_constant()
        why = why_not_plain(cls)
        if why is not None:
            raise GraphBreak(f"object.__new__({cls.__qualname__}) in captured code: {why}")
        made = cls_value if isinstance(cls_value, MadeClassValue) else None
        return _new_object(cls, cls_value.source or ClassSource(cls), tuple(_OPEN.get(id(tx.ctx), ())), made)


def _run_init(tx, cls_value, class_source, init, args, kwargs, born_in, obj=None) -> tuple[Value, "NewObjectValue"]:
    from .wrap import wrap

    from .classes import MadeClassValue
    from .functions import UserFunctionValue
    from .objects import modelled_function

    cls = cls_value.as_constant()
    made = cls_value if isinstance(cls_value, MadeClassValue) else None
    if obj is None:
        obj = _new_object(cls, class_source, born_in, made)
    model = modelled_function(init)
    owner, own_init = made.lookup("__init__") if made is not None else (None, None)
    if isinstance(owner, MadeClassValue):
        init_value = own_init  # the namespace's function, with its closure cells
    elif model is init:
        # Through the class, so that assigning ``Cls.__init__`` (or a base's) recompiles.
        init_value = wrap(tx, init, AttrSource(class_source, "__init__"))
    else:
        init_value = UserFunctionValue(model)
    calling, tx.calling = tx.calling, False  # __init__'s result is not the CALL's
    try:
        return init_value.call(tx, [obj, *args], kwargs), obj
    finally:
        tx.calling = calling


def _new_object(cls: type, class_source, born_in: tuple, made=None) -> "NewObjectValue":
    """The value of a new ``cls`` object: a dict subclass has items besides its attributes."""
    from .subclasses import NewDictObjectValue, NewListObjectValue, container_base

    base = container_base(cls)
    if made is not None:
        if base is not None:
            raise GraphBreak(f"creating a {cls.__qualname__} object: a {base.__name__} subclass made in captured code")
        from .classes import MadeObjectValue

        return MadeObjectValue(made, born_in)
    if base is list:
        return NewListObjectValue(cls, class_source, born_in)
    if base is not None:
        return NewDictObjectValue(cls, class_source, born_in, base)
    return NewObjectValue(cls, class_source, born_in)


class NewObjectValue(ObjectValue):
    """An instance created by the captured code: its attributes are the trace's (``attrs``)."""

    def __init__(self, cls: type, class_source, born_in: tuple, placeholder=None):
        # The placeholder is made by a built-in ``__new__``, which runs no user code.
        super().__init__(object.__new__(cls) if placeholder is None else placeholder, None)
        self.class_source = class_source
        #: Instance attributes in the order they were first written (the runtime ``__dict__``'s order).
        self.attrs: dict[str, Value] = {}
        #: The instantiations being traced when it was made (its own included): writes to it are theirs.
        self.born_in = born_in

    def describe(self):
        return f"{type(self.obj).__qualname__} object created in captured code"

    def real_object(self):
        raise GraphBreak(f"{self.describe()} is a new object on each call")

    def written_attribute(self, tx, name: str) -> Value:
        # The placeholder's own ``__dict__`` stays empty: nothing else is an instance attribute.
        return self.attrs.get(name)

    def setattr(self, tx, name, value):
        """``obj.name = value``: the class's own ``__setattr__`` inlined (eager calls it), else the store."""
        from .constant import ConstantValue

        cls = type(self.obj)
        if _frozen_dataclass_hook(cls, "__setattr__"):
            return _frozen_store(tx, self, name, value)
        if lookup_hook(cls, "__setattr__") is None:
            return super().setattr(tx, name, value)
        self.call_special(tx, "__setattr__", [ConstantValue(name), value], f"assigning `.{name}`")

    def store(self, tx, name, value):
        cls = type(self.obj)
        attr = class_lookup(cls, name)
        if attr is not _MISSING and _is_data_descriptor(attr) and not _is_slot(cls, attr):
            from .descriptor_protocol import set_through_descriptor

            set_through_descriptor(tx, self, name, attr, value)  # a property's setter, a Python __set__
            return
        if attr is _MISSING or not _is_slot(cls, attr):
            if not cls.__dictoffset__:
                from .exceptions import python_error

                raise python_error(AttributeError, f"{cls.__name__!r} object has no attribute {name!r}",
                                   reason=f"assigning `.{name}` on {self.describe()}, whose class has __slots__ "
                                          "without it (AttributeError at run time)")
        self._changed(tx)
        self.attrs[name] = value

    def _changed(self, tx) -> None:
        """Count a change of the object's contents, which cannot be rolled back: a break before it cannot
        resume (``capture``), unless the object is made after that point (``instantiate``)."""
        tx.ctx.mutations += 1
        for record in self.born_in:
            record.fresh += record.open

    def delete_attribute(self, tx, name: str) -> None:
        """``del obj.name``: the attribute leaves the trace's ``__dict__`` (a class attribute then shows); a
        data descriptor of the class (a property's deleter, a Python ``__delete__``) decides instead."""
        attr = class_lookup(type(self.obj), name)
        if attr is not _MISSING and _is_data_descriptor(attr):
            if _is_slot(type(self.obj), attr):
                raise GraphBreak(f"`del` of the slot `.{name}` on {self.describe()}")
            from .descriptor_protocol import delete_through_descriptor

            delete_through_descriptor(tx, self, name, attr)
            return
        if name not in self.attrs:
            raise GraphBreak(f"`del` of `.{name}`: {self.describe()} has no instance attribute {name!r} "
                             "(AttributeError at run time)")
        self._changed(tx)
        del self.attrs[name]

    def reconstruct(self, cg) -> None:
        """One runtime object however many places hold it: made first, then filled (it may hold itself)."""
        if cg.load_shared(self):
            return
        cg.append("PUSH_NULL")
        cg.load_const(object.__new__)
        cg.load_const(type(self.obj))  # the class is guarded by identity
        cg.append("PRECALL", 1)
        cg.append("CALL", 1)
        cg.keep_shared(self)
        self.fill_attributes(cg)
        cg.load_shared(self)

    def fill_attributes(self, cg) -> None:
        """Emit the stores of its attributes into the shared runtime object's ``__dict__`` (its slots
        through ``object.__setattr__``, CPython's member descriptors: no user code)."""
        cls = type(self.obj)
        for name, value in self.attrs.items():
            if _is_slot(cls, class_lookup(cls, name)):
                cg.append("PUSH_NULL")
                cg.load_const(object.__setattr__)
                cg.load_shared(self)
                cg.load_const(name)
                value.reconstruct(cg)
                cg.append("PRECALL", 3)
                cg.append("CALL", 3)
                cg.append("POP_TOP")
                continue
            value.reconstruct(cg)
            if has_lookup_hooks(cls):  # ``obj.__dict__`` would run its own __getattribute__
                cg.call(object.__getattribute__, _Shared(self), "__dict__")
            else:
                cg.load_shared(self)
                cg.append("LOAD_ATTR", "__dict__")
            cg.load_const(name)
            cg.append("STORE_SUBSCR")


class _Shared(Value):
    """The runtime object already built for ``value`` (``Emitter.keep_shared``)."""

    def __init__(self, value: Value):
        self.value = value

    def reconstruct(self, cg) -> None:
        cg.load_shared(self.value)
