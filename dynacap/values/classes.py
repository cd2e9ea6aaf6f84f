"""Classes made by the captured code (a ``class`` statement, ``type(name, bases, ns)``) and their instances.

In eager, every run of a ``class`` statement makes a new class: its identity,
its attributes (a list in the body, ``Bag.count += 1``) and what its creation
does (the body's prints, ``__set_name__``, a base's ``__init_subclass__``) belong
to that call only.  A ``MadeClassValue`` is that class in one trace: its
namespace is the trace's values (the body's functions keep their closure cells,
a list attribute is the trace's list), and a real *template* class, made once
per trace with ``type()`` over stand-ins of those values, gives the MRO, the
layout (``__slots__``), ``isinstance``/``issubclass`` and ``except`` matching
exactly as CPython computes them.  The template never runs user code (no
metaclass but ``type``, no base with its own ``__init_subclass__``; stand-ins
have no ``__set_name__``), changes only as the trace changes the class
(``K.x = v``; ``@dataclass`` swaps in a completed copy before anything used
it, ``class_factories``), and never reaches the user: attributes the class owns are answered from the namespace;
those of real bases are read (and guarded) through the template, which reaches
them along its MRO.  A class that escapes (returned, stored, live across a
break, the class of an escaping instance) is made again at run time by
``type(name, bases, namespace)`` from the rebuilt values, once per run; where
that would not be the class eager made (a closure among its functions, a
``__set_name__`` or ``__init_subclass__`` that ran) it is a graph break.

``MadeObjectValue`` is an instance of such a class: a ``NewObjectValue`` whose
class attributes come from the namespace first.  Descriptors made in a class
body are ``made_descriptors``' values.
"""
from __future__ import annotations

import dataclasses
import types
import weakref

from ..errors import GraphBreak
from ..source import ClassSource
from .base import Value
from .constant import ConstantValue, is_literal
from .made_descriptors import PropertyValue, StaticMethodValue
from .instances import NewObjectValue
from .objects import _MISSING, AttributeMissing, escaped

_TYPE_MRO = type.__dict__["__mro__"]
_TYPE_DICT = type.__dict__["__dict__"]
_OBJECT_INIT_SUBCLASS = object.__dict__["__init_subclass__"]
#: Attributes of ``type`` (data descriptors) whose answer is the namespace's entry or the template's.
_TYPE_ANSWERED = frozenset({"__name__", "__qualname__", "__module__", "__doc__", "__annotations__", "__class__",
                            "__bases__", "__mro__"})

#: id(TraceContext) -> {id(template): MadeClassValue}: how a template met as a real object maps back to its
#: value (dropped with the context).
_MADE: dict[int, dict[int, "MadeClassValue"]] = {}


class _Stand_in:
    """What the template holds for an attribute that is a value of the trace (a list, an object, a tensor).

    It has no ``__set_name__``, ``__get__`` or ``__set__``: the namespace's value decides how it behaves.
    """

    __slots__ = ("name",)

    def __init__(self, name: str):
        self.name = name

    def __repr__(self):
        return f"<attribute {self.name} of a class made in captured code>"


def is_template(cls: type) -> bool:
    """Whether ``cls`` is the template of a class made in a trace (never a class the user may hold)."""
    return cls in _TEMPLATES


#: Every template alive (weakly): a template in rewritten code would be one class for every call.
_TEMPLATES: "weakref.WeakSet[type]" = weakref.WeakSet()


def made_class(tx, obj) -> "MadeClassValue | None":
    """The value of ``obj`` when it is the template of a class this trace made, else None."""
    made = _MADE.get(id(tx.ctx))
    return made.get(id(obj)) if made else None


def _register(tx, value: ConstantValue) -> None:
    """``value.value`` is a template of this trace: mapped back to ``value`` where it is met as an object."""
    made = _MADE.get(id(tx.ctx))
    if made is None:
        made = _MADE[id(tx.ctx)] = {}
        weakref.finalize(tx.ctx, _MADE.pop, id(tx.ctx), None)
    made[id(value.value)] = value
    _TEMPLATES.add(value.value)


def mro(cls: type) -> tuple:
    return _TYPE_MRO.__get__(cls)


def own_dict(cls: type) -> dict:
    return _TYPE_DICT.__get__(cls)


def _no_init_subclass(cls, **kwargs):
    """The template's ``__init_subclass__``: the namespace's is traced (``_after_creation``), never run."""


def _real_stand_in(value: Value, name: str):
    """The object the template holds for ``value``: the real constant or trace-time function, else a stand-in."""
    from .functions import UserFunctionValue

    if name == "__init_subclass__":
        return classmethod(_no_init_subclass)

    if isinstance(value, MadeClassValue):
        return value.value
    if isinstance(value, StaticMethodValue):
        return value.kind_type(_real_stand_in(value.function, name))
    if isinstance(value, PropertyValue):
        return property(*(_real_stand_in(value.parts[k], k) for k in ("fget", "fset", "fdel")))
    if isinstance(value, UserFunctionValue):
        return value.fn
    if value.is_constant():
        return value.as_constant()
    return _Stand_in(name)


class MadeClassValue(ConstantValue):
    """A class made by the captured code: constant as a type (``isinstance``, ``except``), new on each call."""

    def __init__(self, template: type, bases: list[Value], namespace: dict[str, Value]):
        super().__init__(template)
        self.bases = bases
        #: The class's own attributes, in the order the body stored them (its ``__dict__``'s order).
        self.namespace = namespace
        #: Why the class cannot be made again at run time (None: ``type(name, bases, namespace)`` is it).
        self.not_rebuilt: str | None = None
        #: Whether an instance or a subclass was made (``@dataclass`` may then no longer change the template).
        self.observed = False
        #: How a class decorator completed the class in the trace (``@dataclass``: ``class_factories``), to
        #: complete it again when it is made at run time.
        self.completion: Completion | None = None
        #: While ``type(name, bases, namespace)`` is being emitted: the new cells of its functions that hold the
        #: class itself (its name, ``__class__``) wait in ``pending_cells`` until it is made.
        self.building = False
        self.pending_cells: list = []
        #: template -> value, for this class and the made classes among its bases (their MRO entries).
        self.made = {id(template): self}
        for base in bases:
            if isinstance(base, MadeClassValue):
                self.made.update(base.made)

    def describe(self):
        return f"class {self.value.__qualname__} created in captured code"

    def real_object(self):
        raise GraphBreak(f"{self.describe()} is a new class on each call")

    def lookup(self, name: str):
        """``_PyType_Lookup``: (owner, attribute) along the MRO; a made owner gives its namespace's value.

        ``(None, _MISSING)`` when no class has it.
        """
        for klass in mro(self.value):
            made = self.made.get(id(klass))
            if made is not None and name in made.namespace:
                return made, made.namespace[name]
            # A real class's, or what ``type()`` added to a template (``__dict__``, ``__doc__``, slots).
            if name in own_dict(klass):
                return klass, own_dict(klass)[name]
        return None, _MISSING

    def getattr(self, tx, name):
        if name in ("__name__", "__qualname__"):
            # The type's own slots (a class body's ``__qualname__`` entry is moved there, never inherited).
            return ConstantValue(getattr(self.value, name))
        if name in ("__bases__", "__mro__"):
            classes = self.bases if name == "__bases__" else [self.made.get(id(k)) or ConstantValue(k)
                                                             for k in mro(self.value)]
            from .containers import TupleValue

            return TupleValue(list(classes))
        if name == "__class__":
            return ConstantValue(type(self.value))
        owner, attr = self.lookup(name)
        meta_attr = own_dict(type).get(name)
        if meta_attr is not None and name not in _TYPE_ANSWERED \
                and (hasattr(type(meta_attr), "__set__") or owner is None):
            # ``K.__dict__``, ``K.mro``, ``K.__subclasses__``: the metaclass's, not modelled here.
            raise GraphBreak(f"attribute `{name}` of {self.describe()} (its metaclass's) is not captured")
        if owner is None:
            raise AttributeMissing(f"{self.describe()} has no attribute {name!r} (AttributeError at run time)")
        if isinstance(owner, MadeClassValue):
            if isinstance(attr, StaticMethodValue):
                return attr.bind(tx, None, self)
            if isinstance(attr, NewObjectValue) and _has(type(attr.obj), "__get__"):
                return attr.call_special(tx, "__get__", [ConstantValue(None), self], f"attribute `{name}`")
            return attr
        if isinstance(attr, classmethod):
            from .functions import BoundMethodValue, UserFunctionValue

            if type(attr.__func__) is not types.FunctionType:
                raise GraphBreak(f"attribute `{name}` of {self.describe()} is a classmethod of a built-in")
            self._guard_inherited(tx, name, attr)
            return BoundMethodValue(UserFunctionValue(attr.__func__), self)
        if owner is self.value and is_literal(attr):
            return ConstantValue(attr)  # what ``type()`` set (``__doc__``, ``__module__``): fixed per trace
        if name.startswith("__") and name.endswith("__") and not isinstance(attr, types.FunctionType):
            raise GraphBreak(f"attribute `{name}` of {self.describe()}")
        return super().getattr(tx, name)  # read (and guarded) through the template, along its MRO

    def _guard_inherited(self, tx, name: str, attr) -> None:
        from .objects import class_lookup

        tx.guards.add("ID_MATCH", ClassSource(self.value), f"{{lookup}}({{s}}, {name!r}) is {{attr}}",
                      f"{self.value.__qualname__}.{name} is {name}", lookup=class_lookup, attr=attr)

    def setattr(self, tx, name, value):
        """``Cls.name = value``: the namespace changes (no user code: the metaclass is ``type``)."""
        if name.startswith("__") and name.endswith("__"):
            raise GraphBreak(f"assigning `.{name}` on {self.describe()} (a special attribute) is not captured")
        owner, attr = self.lookup(name)
        if owner is not None and not isinstance(owner, MadeClassValue) and owner is not self.value:
            # Reads of it so far went (and reload at run time) through the template to the base's.
            raise GraphBreak(f"assigning `.{name}` on {self.describe()} shadows the attribute of its base "
                             f"{owner.__qualname__}: not captured")
        if name in own_dict(type):
            raise GraphBreak(f"assigning `.{name}` on {self.describe()}, an attribute of its metaclass")
        tx.ctx.mutations += 1  # a change no rollback undoes: a break before it does not resume
        self.namespace[name] = value
        # The template follows (no user code: a plain ``type``): what reads it for real (``hasattr``,
        # ``class_lookup``) sees the class as the trace left it.  A guard made from an earlier read through
        # it then fails on the next call, which traces again.
        type.__setattr__(self.value, name, _real_stand_in(value, name))

    def delete_attribute(self, tx, name: str) -> None:
        if name.startswith("__") and name.endswith("__"):
            raise GraphBreak(f"`del` of `.{name}` on {self.describe()} (a special attribute) is not captured")
        if name not in self.namespace:
            if name in own_dict(self.value) or name in own_dict(type):
                raise GraphBreak(f"`del` of `.{name}` on {self.describe()}")
            from .exceptions import python_error

            raise python_error(AttributeError, f"type object {self.value.__name__!r} has no attribute {name!r}",
                               reason=f"`del` of `.{name}`: {self.describe()} has no attribute {name!r} of its own "
                                      "(AttributeError at run time)")
        tx.ctx.mutations += 1
        del self.namespace[name]
        type.__delattr__(self.value, name)

    def call(self, tx, args, kwargs):
        from .instances import instantiate

        return instantiate(tx, self, args, kwargs)

    def getitem(self, tx, index):
        """``K[item]``: the class's ``__class_getitem__`` (an implicit classmethod), traced."""
        owner, hook = self.lookup("__class_getitem__")
        if not isinstance(owner, MadeClassValue):
            raise GraphBreak(f"indexing {self.describe()}" + ("" if owner is None else
                                                              f" through {owner.__qualname__}.__class_getitem__"))
        function = hook.function if isinstance(hook, StaticMethodValue) else hook
        return call_accessor(tx, function, [self, index])

    def iterate(self, tx):
        raise GraphBreak(f"iterating over {self.describe()} (its metaclass's __iter__)")

    def reconstruct(self, cg) -> None:
        if self.not_rebuilt is not None:
            raise GraphBreak(f"{self.describe()} cannot be made again after the graph: {self.not_rebuilt}")
        completion = self.completion
        if completion is not None and (list(self.namespace) != list(completion.completed) or any(
                value is not completion.completed[name] for name, value in self.namespace.items())):
            raise GraphBreak(f"{self.describe()} cannot be made again after the graph: the captured code changed it "
                             "after its decorator completed it")
        if cg.load_shared(self):
            return
        self.building, self.pending_cells = True, []
        try:
            self._build(cg)
        finally:
            self.building = False
        cg.keep_shared(self)
        for box in self.pending_cells:  # ``cell.cell_contents = cls`` (functions.UserFunctionValue)
            cg.load_shared(self)
            cg.load_shared(box)
            cg.append("STORE_ATTR", "cell_contents")
        self.pending_cells = []
        cg.load_shared(self)

    def _build(self, cg) -> None:
        """``type(name, bases, namespace)``: the metaclass is ``type`` and nothing runs user code; a class a
        decorator completed is the body's namespace, completed by the decorator again (``Completion``)."""
        completion = self.completion
        if completion is not None:
            cg.append("PUSH_NULL")
            cg.load_const(completion.function)
        namespace = completion.body if completion is not None else self.namespace
        cg.append("PUSH_NULL")
        cg.load_const(type)
        cg.load_const(self.value.__name__)
        for base in self.bases:
            base.reconstruct(cg)
        cg.append("BUILD_TUPLE", len(self.bases))
        for name, value in namespace.items():
            cg.load_const(name)
            value.reconstruct(cg)
        cg.append("BUILD_MAP", len(namespace))
        cg.append("PRECALL", 3)
        cg.append("CALL", 3)
        if completion is not None:
            cg.load_const(completion.options)
            cg.append("PRECALL", 2)
            cg.append("CALL", 2)


@dataclasses.dataclass
class Completion:
    """A class decorator that completed a made class in the trace: ``function(cls, options)`` completes the
    class made again at run time from ``body`` (the namespace the decorator was given) as it did in the trace,
    where it left ``completed`` (the namespace the trace must still hold for the two to be the same class)."""

    function: object
    options: dict
    body: dict
    completed: dict


def _type_of(value: Value) -> type:
    try:
        return value.python_type()
    except GraphBreak:
        return object  # a kind whose type is not known: no ``__set_name__`` of its own to call


def _has(cls: type, name: str) -> bool:
    return any(name in own_dict(k) for k in mro(cls))


def call_accessor(tx, accessor: Value, args: list[Value]) -> Value:
    """A getter, setter or special method called by the lookup (its result is not a CALL's)."""
    calling, tx.calling = tx.calling, False
    try:
        return accessor.call(tx, args, {})
    except AttributeMissing as e:
        raise escaped(e) from None
    finally:
        tx.calling = calling


def bind(tx, attr: Value, instance: Value, owner: Value, name: str) -> Value:
    """What a class attribute of a made class (a namespace value) gives read through ``instance``
    (``owner``: the instance's class): methods bound, a property's getter called, ``__get__`` traced."""
    from .functions import BoundMethodValue, UserFunctionValue

    if isinstance(attr, UserFunctionValue):
        return BoundMethodValue(attr, instance)
    if isinstance(attr, StaticMethodValue):
        return attr.bind(tx, instance, owner)
    if isinstance(attr, PropertyValue):
        return call_accessor(tx, attr.accessor("fget", f"attribute `{name}`"), [instance])
    if isinstance(attr, NewObjectValue) and _has(type(attr.obj), "__get__"):
        return attr.call_special(tx, "__get__", [instance, owner], f"attribute `{name}`")
    return attr


def super_attribute(tx, klass: type, name: str, instance: Value) -> Value | None:
    """``super().<name>`` found in ``klass`` when it is a class made in this trace (None: it is not,
    or its namespace lacks the name); bound to ``instance`` as the lookup binds it."""
    made = made_class(tx, klass)
    if made is None or name not in made.namespace:
        return None
    owner = instance.class_value if isinstance(instance, MadeObjectValue) else made
    return bind(tx, made.namespace[name], instance, owner, name)


class MadeObjectValue(NewObjectValue):
    """An instance of a class made by the captured code: class attributes from the namespaces first."""

    def __init__(self, class_value: MadeClassValue, born_in: tuple):
        super().__init__(class_value.value, ClassSource(class_value.value), born_in)
        self.class_value = class_value
        class_value.observed = True

    def getattr(self, tx, name):
        try:
            return self._generic(tx, name)
        except AttributeMissing as e:
            owner, _ = self.class_value.lookup("__getattr__")
            if owner is None or e.frames:
                raise
            return self.call_special(tx, "__getattr__", [ConstantValue(name)], f"attribute `{name}`")

    def _generic(self, tx, name: str) -> Value:
        """``object.__getattribute__``: data descriptors, then the instance's attributes, then the class's."""
        from .objects import generic_getattr

        if name == "__class__":
            return self.class_value
        owner, attr = self.class_value.lookup(name)
        if not isinstance(owner, MadeClassValue):
            return generic_getattr(tx, self, name)  # a real base's (or none): read through the template
        what = f"attribute `{name}`"
        if isinstance(attr, PropertyValue):
            return self._call_accessor(tx, attr.accessor("fget", what), [])
        descriptor = isinstance(attr, NewObjectValue)
        if descriptor and (_has(type(attr.obj), "__set__") or _has(type(attr.obj), "__delete__")) \
                and _has(type(attr.obj), "__get__"):
            return attr.call_special(tx, "__get__", [self, self.class_value], what)
        if name in self.attrs:
            return self.attrs[name]
        return bind(tx, attr, self, self.class_value, name)

    def _call_accessor(self, tx, accessor: Value, args: list[Value]) -> Value:
        return call_accessor(tx, accessor, [self, *args])

    def call_special(self, tx, name, args, what):
        owner, attr = self.class_value.lookup(name)
        if not isinstance(owner, MadeClassValue):
            return super().call_special(tx, name, args, what)
        if isinstance(attr, StaticMethodValue):
            return self._call_accessor_unbound(tx, attr.bind(tx, self, self.class_value), args)
        from .functions import UserFunctionValue

        if not isinstance(attr, UserFunctionValue):
            raise GraphBreak(f"{what} on {self.describe()}, whose class has {attr.describe()} as {name}")
        return self._call_accessor(tx, attr, args)

    def _call_accessor_unbound(self, tx, function: Value, args: list[Value]) -> Value:
        calling, tx.calling = tx.calling, False
        try:
            return function.call(tx, args, {})
        finally:
            tx.calling = calling

    def call(self, tx, args, kwargs):
        owner, attr = self.class_value.lookup("__call__")
        if not isinstance(owner, MadeClassValue):
            return super().call(tx, args, kwargs)
        return self._generic_method(tx, "__call__", attr).call(tx, args, kwargs)

    def _generic_method(self, tx, name: str, attr: Value) -> Value:
        from .functions import BoundMethodValue, UserFunctionValue

        if isinstance(attr, UserFunctionValue):
            return BoundMethodValue(attr, self)
        if isinstance(attr, StaticMethodValue):
            return attr.bind(tx, self, self.class_value)
        raise GraphBreak(f"calling {self.describe()}, whose class has {attr.describe()} as {name}")

    def setattr(self, tx, name, value):
        owner, attr = self.class_value.lookup("__setattr__")
        if isinstance(owner, MadeClassValue):
            self.call_special(tx, "__setattr__", [ConstantValue(name), value], f"assigning `.{name}`")
            return
        self.store(tx, name, value)

    def store(self, tx, name, value):
        owner, attr = self.class_value.lookup(name)
        if isinstance(owner, MadeClassValue):
            if isinstance(attr, PropertyValue):
                self._call_accessor(tx, attr.accessor("fset", f"assigning `.{name}`"), [value])
                return
            if isinstance(attr, NewObjectValue) and _has(type(attr.obj), "__set__"):
                attr.call_special(tx, "__set__", [self, value], f"assigning `.{name}`")
                return
            self._changed(tx)
            self.attrs[name] = value
            return
        super().store(tx, name, value)

    def delete_attribute(self, tx, name):
        owner, attr = self.class_value.lookup(name)
        if isinstance(owner, MadeClassValue) and isinstance(attr, PropertyValue):
            self._call_accessor(tx, attr.accessor("fdel", f"`del` of `.{name}`"), [])
            return
        if isinstance(owner, MadeClassValue) and isinstance(attr, NewObjectValue) \
                and _has(type(attr.obj), "__delete__"):
            attr.call_special(tx, "__delete__", [self], f"`del` of `.{name}`")
            return
        if isinstance(owner, MadeClassValue) and name not in self.attrs:
            raise GraphBreak(f"`del` of `.{name}`: {self.describe()} has no instance attribute {name!r} "
                             "(AttributeError at run time)")
        if isinstance(owner, MadeClassValue):
            self._changed(tx)
            del self.attrs[name]
            return
        super().delete_attribute(tx, name)

    def reconstruct(self, cg) -> None:
        """``object.__new__(cls)`` of the class made again at run time, then its ``__dict__``."""
        if cg.load_shared(self):
            return
        cg.append("PUSH_NULL")
        cg.load_const(object.__new__)
        self.class_value.reconstruct(cg)
        cg.append("PRECALL", 1)
        cg.append("CALL", 1)
        cg.keep_shared(self)
        self.fill_attributes(cg)
        cg.load_shared(self)


def make_class(tx, name: str, bases: list[Value], namespace: dict[str, Value], kwargs: dict[str, Value],
               classcell) -> MadeClassValue:
    """What ``type.__new__(type, name, bases, namespace)`` makes, traced: the template, then
    ``__set_name__`` on the attributes and the base's ``__init_subclass__``, as CPython calls them."""
    real_bases = []
    for base in bases:
        if not base.is_constant() or type(base.as_constant()) is not type:
            what = base.describe()
            raise GraphBreak(f"class {name} with the base {what}: only plain classes (metaclass type) are "
                             "captured as bases of a class made in captured code")
        real_bases.append(base.as_constant())
    made_bases = {}
    for base in bases:
        if isinstance(base, MadeClassValue):
            made_bases.update(base.made)
            base.observed = True
    for base in real_bases:
        for klass in mro(base):
            if id(klass) not in made_bases and own_dict(klass).get("__init_subclass__", _OBJECT_INIT_SUBCLASS) \
                    is not _OBJECT_INIT_SUBCLASS:
                raise GraphBreak(f"class {name}: its base {klass.__qualname__} has its own __init_subclass__, which "
                                 "runs when the class is made: it runs eagerly")
    real_ns = {k: _real_stand_in(v, k) for k, v in namespace.items()}
    try:
        template = type(name, tuple(real_bases), real_ns)
    except TypeError as e:
        raise GraphBreak(f"class {name}: {e} (TypeError at run time)") from None
    value = MadeClassValue(template, list(bases), dict(namespace))
    _register(tx, value)
    _fill_class_cells(template, namespace)
    if classcell is not None:
        classcell.set(value)
    _after_creation(tx, value, kwargs)
    return value


def _fill_class_cells(template: type, namespace: dict[str, Value]) -> None:
    """The ``__class__`` cell of the template's trace-time functions holds the template (zero-argument
    ``super()`` where code reaches the function through the template, not the namespace)."""
    from .functions import UserFunctionValue

    for value in namespace.values():
        function = value.function if isinstance(value, StaticMethodValue) else value
        if isinstance(function, UserFunctionValue) and "__class__" in function.fn.__code__.co_freevars:
            index = function.fn.__code__.co_freevars.index("__class__")
            function.fn.__closure__[index].cell_contents = template


def _after_creation(tx, value: MadeClassValue, kwargs: dict[str, Value]) -> None:
    """``__set_name__`` of each attribute (namespace order), then the first base's ``__init_subclass__``."""
    from .objects import ObjectValue

    for name, attr in list(value.namespace.items()):
        if isinstance(attr, ObjectValue) and _has(type(attr.obj), "__set_name__"):
            attr.call_special(tx, "__set_name__", [value, ConstantValue(name)], "__set_name__")
            value.not_rebuilt = f"making it again would call {name}.__set_name__ again"
        elif not isinstance(attr, (ConstantValue, PropertyValue)) and _has(_type_of(attr), "__set_name__"):
            raise GraphBreak(f"class {value.value.__name__}: the __set_name__ of its attribute {name} "
                             f"({attr.describe()}) is not captured")
    for klass in mro(value.value)[1:]:
        made = value.made.get(id(klass))
        if made is not None and "__init_subclass__" in made.namespace:
            hook = made.namespace["__init_subclass__"]
            function = hook.function if isinstance(hook, StaticMethodValue) else hook
            calling, tx.calling = tx.calling, False
            try:
                function.call(tx, [value], kwargs)
            finally:
                tx.calling = calling
            value.not_rebuilt = "making it again would call __init_subclass__ again"
            return
        if made is None and "__init_subclass__" in own_dict(klass):
            break  # object's: takes no keyword arguments
    if kwargs:
        raise GraphBreak(f"class {value.value.__name__} with keyword arguments {sorted(kwargs)} and no "
                         "__init_subclass__ to take them (TypeError at run time)")


def type_call(tx, args: list[Value], kwargs: dict[str, Value]) -> MadeClassValue:
    """``type(name, bases, namespace, **kwargs)``: a class made in the trace, as a ``class`` statement makes it.

    ``__module__`` is the calling frame's ``__name__`` when the namespace has none, as CPython sets it.
    """
    from .containers import DictValue, TupleValue

    name, bases, namespace = args
    if not name.is_constant() or type(name.as_constant()) is not str or not isinstance(bases, TupleValue) \
            or not isinstance(namespace, DictValue) or not all(type(k) is str for k in namespace.items):
        raise GraphBreak("type() with three arguments that are not a name, a tuple of bases and a dict of names")
    attributes = dict(namespace.items)
    if "__module__" not in attributes and "__name__" in tx.f_globals:
        attributes["__module__"] = ConstantValue(tx.f_globals["__name__"])
    return make_class(tx, name.as_constant(), list(bases.items), attributes, dict(kwargs), None)
