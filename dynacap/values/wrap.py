"""``wrap``: choose the value kind for a runtime object, and guard it through its source.

This is the one place that maps Python objects to ``Value`` kinds.  Each
object read from the frame (argument, global, attribute, closure cell)
passes through ``wrap`` exactly once per trace, which installs the guards
that make reusing the capture sound: tensor metadata, constant values,
container lengths, and the identity of modules, functions and other
objects.  Objects created during tracing are wrapped without a source and
need no guard; the arguments of resume and chain functions, which may be
objects made anew by each call before them (a lambda, an ``nn.ReLU()``),
are guarded by what they are made of instead of identity.
"""
from __future__ import annotations

import collections
import functools
import inspect
import re
import types
import typing

import torch

from .. import config, trace_rules
from ..errors import GraphBreak, is_generated
from ..source import AttrSource, ItemSource, LocalSource, Source
from .autocast import AutocastFactory, AutocastFactoryValue
from .base import Value
from .class_state import ClassValue
from .builtins import BuiltinValue
from .builtins.introspection import TYPE_PREDICATES, SignatureValue, TypePredicateValue
from .constant import ConstantValue, is_literal
from .containers import DictValue, FrameItems, ListValue, SizeValue, TupleValue
from .enums import is_enum_member, member_value
from .functions import OpaqueCallableValue, PythonModuleValue, UserFunctionValue
from .keyed_dicts import KeyedDictValue, reads_by_key
from .library import LibraryCallableValue
from .module import ModuleValue
from .namespaces import GlobalsValue, is_module_globals
from .numpy_ns import is_numpy_object
from .objects import ObjectValue, has_lookup_hooks
from .subclasses import NamedTupleValue, TupleNewValue, namedtuple_fields, plain_tuple_class
from .frame_iterators import RANGE_ITERATOR, FrameRangeIterator
from .torch_ns import TorchValue, is_torch_object


#: Kinds of library callables a trace rule may name (``itertools.chain``, ``chain.from_iterable``).
_LIBRARY_CALLABLE_TYPES = (type, types.BuiltinFunctionType, types.BuiltinMethodType)
#: Typing constructs (``List``, ``Optional[int]``, ``list[int]``, a ``TypeVar``): immutable, subscripted for real.
_TYPING_TYPES = frozenset({type(typing.List), type(typing.Optional), type(typing.Literal), type(typing.Any),
                           type(typing.List[int]),
                           type(typing.Union[int, str]), type(typing.Callable[[int], int]), type(list[int]),
                           typing.TypeVar, typing.ForwardRef})
#: Dict types held as ``DictValue`` (constant keys) or ``KeyedDictValue`` (tensor keys).
_DICT_TYPES = (dict, collections.OrderedDict, collections.defaultdict)


def wrap(tx, obj, source: Source | None) -> Value:
    # Objects are classified by ``type(obj)`` only: ``isinstance`` reads ``obj.__class__``, which
    # runs a class's own ``__getattribute__`` (user code the program never called).
    g = tx.guards
    t = type(obj)
    if issubclass(t, type):
        from .classes import made_class

        made = made_class(tx, obj)
        if made is not None:
            return made  # a class this trace made: its namespace, made again at run time if it escapes
    if issubclass(t, torch.Tensor):
        if source is None:
            raise GraphBreak("a tensor created outside the graph (no way to reach it from the frame)")
        # Parameters keep static shapes: a model's weights do not change size between calls.
        choices = tx.ctx.shapes.tensor_dims(source.expr(), obj) \
            if tx.ctx.shapes is not None and t is not torch.nn.Parameter else None
        value = tx.graph.input_tensor(source, obj, choices)
        g.tensor_match(source, obj, value.fake)
        if value.source is not None and value.source != source and value.node.op == "placeholder":
            g.add("TENSOR_ALIASING", source, "{s} is " + value.source.expr(),
                  f"{source.expr()} is {value.source.expr()}", op=("IS_SOURCE", source, value.source, True))
        return value
    if issubclass(t, torch.Size):
        if source is not None:
            items = _symbolic_size_items(tx, obj, source)
            if items is not None:
                return SizeValue(items, source)
            g.equals_match(source, obj)
        return SizeValue([ConstantValue(d) for d in obj], source)
    if t.__module__ == "numpy" or t.__module__.startswith("numpy."):
        value = _numpy_object(tx, obj, source)
        if value is not None:
            return value
    if t is int and isinstance(source, LocalSource) and tx.ctx.shapes is not None \
            and tx.ctx.shapes.int_is_symbolic(source.expr(), obj):
        return _symbolic_int(tx, obj, source)
    if t in (set, frozenset) and source is not None and all(is_literal(x) for x in obj):
        return _frame_set(tx, obj, source)
    if is_enum_member(obj):
        return member_value(tx, obj, source)
    if is_literal(obj) and t is not tuple:
        if source is not None:
            g.equals_match(source, obj)
        return ConstantValue(obj, source)
    if issubclass(t, tuple) and t is not tuple and not issubclass(t, torch.Size) \
            and (namedtuple_fields(t) is not None or plain_tuple_class(t)):
        if source is None:
            return NamedTupleValue([wrap(tx, x, None) for x in obj], t)
        g.type_match(source, obj)
        return NamedTupleValue.from_frame(FrameItems(tx, obj, source), t)
    if t is dict and is_module_globals(tx, obj):
        # A frame's own globals (a resume function's argument after a break at ``globals()``): stores
        # into it are global stores, which later ``LOAD_GLOBAL``s see.
        if source is not None:
            g.id_match(source, obj)
        return GlobalsValue(obj, source)
    if (t is list or t in _DICT_TYPES) and id(obj) in tx.ctx.containers:
        return tx.ctx.containers[id(obj)]
    if t in (tuple, list):
        cls = TupleValue if t is tuple else ListValue
        if source is not None:
            g.type_match(source, obj)
            value = cls.from_frame(FrameItems(tx, obj, source))
        else:
            value = cls([wrap(tx, x, None) for x in obj])
        if t is list:
            tx.ctx.containers[id(obj)] = value
        return value
    if t is collections.deque and source is not None:
        from .deques import frame_deque

        return frame_deque(tx, obj, source)
    if t in _DICT_TYPES and source is not None and reads_by_key(obj, source, tx.ctx.keyed_dicts):
        value = KeyedDictValue(tx, obj, source)
        tx.ctx.containers[id(obj)] = value
        return value
    if t in _DICT_TYPES:
        if not all(_constant_key(k) for k in obj):
            raise GraphBreak(f"a {t.__name__} with non-constant keys")
        if source is not None:
            g.type_match(source, obj)
            g.keys_match(source, list(obj))
        factory = None
        if t is collections.defaultdict:
            factory = wrap(tx, obj.default_factory, AttrSource(source, "default_factory") if source is not None
                           else None)
        value = DictValue({k: wrap(tx, v, ItemSource(source, k) if source is not None else None)
                           for k, v in obj.items()}, source, dict_type=t, default_factory=factory)
        tx.ctx.containers[id(obj)] = value
        return value
    if obj is tuple.__new__:
        # ``tuple.__new__(cls, items)`` (``namedtuple``'s ``_make``, a tuple subclass's ``__new__``).
        if source is not None:
            g.id_match(source, obj)
        return TupleNewValue(source)
    if t in _LIBRARY_CALLABLE_TYPES and not is_torch_object(obj):
        rule = trace_rules.rule_for_object(obj, default_module=None)
        if rule is not None:
            if source is not None:
                _guard_library_callable(tx, obj, source)
            return LibraryCallableValue(obj, rule, source)
    if t is functools.partial:
        return _partial(tx, obj, source)
    if source is not None and _is_bound_method(obj):
        return _bound_method(tx, obj, source)
    if t is RANGE_ITERATOR and source is not None:
        return FrameRangeIterator(tx, obj, source)
    value = _object_value(tx, obj, source)
    if source is not None:
        # A nested function reached from such an argument (in a cell of a closure rebuilt before the resume)
        # is new on each call too; a module's function or a class's method keeps its identity guard.
        reach = source.root() if isinstance(value, UserFunctionValue) and "<locals>" in value.fn.__qualname__ \
            else source
        if _made_by_previous_stage(tx, reach) and _guard_by_parts(tx, value, source):
            return value
        if isinstance(value, ObjectValue):
            # Plain objects are often made fresh per call: guard the type, and guard each
            # attribute read through its own source.  Identity is then unknown.
            g.type_match(source, obj)
            value.identity_known = False
        elif isinstance(value, ModuleValue) and config.share_graphs_across_instances:
            # One graph for every instance of a class: the module is guarded by its type and
            # structure, its parameters and buffers are graph inputs.
            value.unspecialize(tx)
        else:
            g.id_match(source, obj)
    return value


def _is_plain_class(key) -> bool:
    """A class (or typing construct) as a dict key: hashed and compared by identity, no user code runs.

    A class whose metaclass keeps ``type``'s ``__eq__`` and ``__hash__`` (an ABC such as
    ``collections.abc.Sequence``, an enum class) is one too.
    """
    if type(key) in _TYPING_TYPES:
        return True
    meta = type(key)
    return issubclass(meta, type) and meta.__eq__ is type.__eq__ and meta.__hash__ is type.__hash__


def _constant_key(key) -> bool:
    """A dict key the trace holds as a constant: a literal, a plain class, or a tuple of these
    (``torch.distributions``' ``_KL_MEMOIZE[type(p), type(q)]``)."""
    return is_literal(key) or _is_plain_class(key) or type(key) is tuple and all(_constant_key(k) for k in key)


def _numpy_object(tx, obj, source) -> Value | None:
    """A NumPy scalar (a constant guarded by type and bits), array (a graph input), ufunc or random generator."""
    import numpy as np

    from .numpy_ns import NumpyValue, is_numpy_object

    if isinstance(obj, np.generic):
        if source is not None:
            tx.guards.add("EQUALS_MATCH", source, "type({s}) is {t} and {s}.tobytes() == {b}",
                          f"{source.expr()} == {obj!r}", t=type(obj), b=obj.tobytes())
        return ConstantValue(obj, source)
    if type(obj) is np.ndarray:
        if source is None:
            raise GraphBreak("a NumPy array made outside the graph (no way to reach it from the frame)")
        from .numpy_ns import array_from_frame

        return array_from_frame(tx, obj, source)
    if is_numpy_object(obj):
        if source is not None:
            tx.guards.id_match(source, obj)
        return NumpyValue(obj, source)
    return None


def _symbolic_int(tx, value: int, source) -> Value:
    """An int input made symbolic: any int fits its type guard; what the trace relied on is guarded symbolically."""
    tx.guards.type_match(source, value)
    return tx.graph.input_symint(source, value)


def _symbolic_size_items(tx, size, source) -> list | None:
    """The dims of a ``torch.Size`` local, some symbolic (``dynamic.ShapePolicy``); None if all are static."""
    policy = tx.ctx.shapes
    if policy is None or not isinstance(source, LocalSource) or type(size) is not torch.Size:
        return None
    expr = source.expr()
    symbolic = [policy.int_is_symbolic(f"{expr}[{i}]", d) for i, d in enumerate(size)]
    if not any(symbolic):
        return None
    tx.guards.length(source, size)
    items = []
    for i, (d, sym) in enumerate(zip(size, symbolic)):
        item_source = ItemSource(source, i)
        if sym:
            items.append(_symbolic_int(tx, d, item_source))
        else:
            tx.guards.equals_match(item_source, d)
            items.append(ConstantValue(d))
    return items


def _frame_set(tx, obj, source) -> Value:
    """A set or frozenset of constants read from the frame: its type guarded here, the rest as it is read.

    ``SetValue`` guards ``len``/``in`` by their answers and anything else by the members in their
    order (equal sets may iterate differently: ``{9, 1}``, ``{1, 9}``).
    """
    from .sets import SetValue

    if id(obj) in tx.ctx.containers:
        return tx.ctx.containers[id(obj)]
    value = SetValue.from_frame(tx, obj, source)  # a NaN member is a break
    tx.guards.type_match(source, obj)
    tx.ctx.containers[id(obj)] = value
    return value


def _made_by_previous_stage(tx, source) -> bool:
    """An argument of a resume or chain function: possibly an object made anew by each call before it.

    Such values (a lambda, an ``nn.ReLU()`` made in ``forward``) are guarded by what they are
    made of, never by identity, or every call would recompile.
    """
    if not isinstance(source, LocalSource):
        return False
    while tx.parent is not None:  # a local source names a local of the trace's root frame
        tx = tx.parent
    return is_generated(tx.code)


#: Argument names of resume and chain functions that hold the value stack (``resume.stack_arg``).
_STACK_ARG = re.compile(r"___stack\d+|___l\d+_s\d+")


def _guard_by_parts(tx, value, source) -> bool:
    """Guard a function by its code and globals, a module by its type and state; False if neither.

    Modules with parameters are unspecialized only when they were on the value stack (the result of
    the breaking call, ``nn.Linear(3, 3)`` in ``forward``): a live local such as ``self`` keeps its
    identity guard and its parameters as graph attributes.
    """
    from .module import is_stateless

    if isinstance(value, UserFunctionValue) and type(value.fn) is types.FunctionType:
        fn = value.fn
        tx.guards.add("TYPE_MATCH", source, "type({s}) is {t} and {s}.__code__ is {code} and {s}.__globals__ is {g}",
                      f"{source.expr()} is a function of {fn.__code__.co_qualname} (line {fn.__code__.co_firstlineno})",
                      t=types.FunctionType, code=fn.__code__, g=fn.__globals__)
        value.identity_known = False
        return True
    if isinstance(value, ModuleValue) and (is_stateless(value.module) or _STACK_ARG.fullmatch(source.name)):
        value.unspecialize(tx)
        return True
    return False


def _partial(tx, obj, source) -> Value:
    """A ``functools.partial`` from the frame: its type guarded, its parts wrapped through their sources."""
    from .functions import PartialValue

    parts = {name: wrap(tx, getattr(obj, name), AttrSource(source, name) if source is not None else None)
             for name in ("func", "args", "keywords")}
    if source is not None:
        tx.guards.type_match(source, obj)
    return PartialValue(parts["func"], parts["args"], parts["keywords"], source)


def _guard_library_callable(tx, obj, source) -> None:
    """By identity; a classmethod bound to its C class (``chain.from_iterable``, a new object on every
    read) by its class and name."""
    owner = getattr(obj, "__self__", None)
    if type(obj) is types.BuiltinMethodType and isinstance(owner, type):
        tx.guards.type_match(source, obj)
        tx.guards.id_match(AttrSource(source, "__self__"), owner)
        tx.guards.equals_match(AttrSource(source, "__name__"), obj.__name__)
    else:
        tx.guards.id_match(source, obj)


def _is_bound_method(obj) -> bool:
    t = type(obj)
    if t is types.MethodType:
        return not is_numpy_object(obj)  # ``np.random.rand``: a method of NumPy's global generator
    if t is not types.BuiltinMethodType:
        return False
    owner = obj.__self__
    if owner is None or issubclass(type(owner), types.ModuleType):
        return False
    # pybind11 binds its C functions to a function record (torch._C._get_tracing_state): functions.
    return type(owner).__module__ != "pybind11_builtins"


def _bound_method(tx, obj, source) -> Value:
    """A bound method read from the frame: a new object on every access, so never guarded by identity.

    The guards are on what it is made of: its type, its function (or name) and its ``__self__``.
    """
    from .container_methods import ContainerMethodValue
    from .functions import BoundMethodValue

    g = tx.guards
    g.type_match(source, obj)
    owner = obj.__self__
    if isinstance(owner, type) and issubclass(owner, torch.autograd.Function) and obj.__name__ == "apply":
        # `self.fn = MyFunction.apply` stored ahead: the same graph node as calling MyFunction.apply.
        from .torch_ns import AutogradApplyValue

        g.id_match(AttrSource(source, "__self__"), owner)
        return AutogradApplyValue(owner)
    self_value = wrap(tx, owner, AttrSource(source, "__self__"))
    if isinstance(obj, types.MethodType):
        function = wrap(tx, obj.__func__, AttrSource(source, "__func__"))
        if isinstance(function, TorchValue) and type(obj.__func__) is types.FunctionType:
            # A method of torch's own Python (the ``clone`` a ``no_grad`` decorator calls, reached through a
            # closure cell): called by its trace rule, as the same method reached without a source is.
            function = UserFunctionValue(obj.__func__, AttrSource(source, "__func__"))
        if isinstance(function, UserFunctionValue):
            return BoundMethodValue(function, self_value, source)
        return OpaqueCallableValue(obj, source)
    name = obj.__name__
    g.equals_match(AttrSource(source, "__name__"), name)
    if isinstance(self_value, (ListValue, DictValue)):
        return ContainerMethodValue(self_value, name)
    from .sets import SetValue

    if isinstance(self_value, SetValue):
        return self_value.getattr(tx, name)  # `s.add` on the stack at a resume: `s.add(t.item())`
    return OpaqueCallableValue(obj, source)


#: torch functions that take a NumPy array made from a tensor back to the tensor.
_TENSOR_FROM_NUMPY = (torch.from_numpy, torch.as_tensor, torch.asarray, torch.tensor)


def _object_value(tx, obj, source) -> Value:
    """The value kind of a non-tensor, non-constant, non-container object."""
    t = type(obj)
    if issubclass(t, AutocastFactory):
        # A resume prefix re-entering an autocast block.
        return AutocastFactoryValue(obj, source)
    if issubclass(t, torch.nn.Module):
        return ModuleValue(obj, source)
    if any(obj is f for f in _TENSOR_FROM_NUMPY):
        from .numpy_ns import TensorFromNumpyValue

        return TensorFromNumpyValue(obj, source)
    if is_numpy_object(obj):
        from .numpy_ns import NumpyValue

        return NumpyValue(obj, source)
    if issubclass(t, types.FunctionType) and is_torch_object(obj):
        # torch's own Python functions (torch.nn.functional.relu, torch.einsum...) are graph
        # operations: their files are never inlined.
        return TorchValue(obj, source)
    if issubclass(t, types.FunctionType):
        if obj in TYPE_PREDICATES:
            return TypePredicateValue(obj, source)
        if obj is inspect.signature:
            return SignatureValue(obj, source)
        return UserFunctionValue(obj, source)
    if t is types.MethodType and type(obj.__func__) is types.FunctionType:
        from .functions import BoundMethodValue

        owner = obj.__self__
        self_value = ModuleValue(owner, None) if issubclass(type(owner), torch.nn.Module) else wrap(tx, owner, None)
        return BoundMethodValue(UserFunctionValue(obj.__func__), self_value, source)
    if t in _TYPING_TYPES:
        return ConstantValue(obj, source)
    if t is functools._lru_cache_wrapper:
        return OpaqueCallableValue(obj, source)  # run on constants: the cache's own answer
    if has_lookup_hooks(t) and not issubclass(t, type) and not t.__module__.startswith("torch"):
        # Any other inspection (``is_torch_object`` reads ``__module__``) would run the class's hooks.
        # (A metaclass's ``__getattr__``, as ``EnumType``'s, runs only for names a class lacks.)
        return ObjectValue(obj, source)
    if is_torch_object(obj):
        return TorchValue(obj, source)
    if t is types.BuiltinFunctionType and obj.__module__ == "builtins":
        return BuiltinValue(obj, source)
    if obj is collections.deque:
        from .deques import DequeClassValue

        return DequeClassValue(source)
    if obj is collections.OrderedDict or obj is collections.defaultdict or obj is functools.partial:
        return BuiltinValue(obj, source)
    if issubclass(t, type) and obj.__module__ == "builtins" and obj.__name__ in (
            "int", "float", "bool", "str", "tuple", "list", "dict", "range", "slice", "type", "enumerate",
            "zip", "reversed", "set", "frozenset", "object", "super", "map", "filter"):
        return BuiltinValue(obj, source)
    if issubclass(t, type):
        return ClassValue(obj, source)  # a constant whose attributes the trace may assign (``class_state``)
    if issubclass(t, types.ModuleType):
        return PythonModuleValue(obj, source)
    if issubclass(t, (types.BuiltinFunctionType, types.MethodWrapperType, types.WrapperDescriptorType)):
        return OpaqueCallableValue(obj, source)
    if callable(obj) and not t.__dictoffset__:
        return OpaqueCallableValue(obj, source)
    return ObjectValue(obj, source)


def wrap_constant_result(result, what: str) -> Value:
    """A capture-time result of a builtin or method on constants."""
    if type(result) in (set, frozenset) and not is_literal(result):
        from .sets import SetValue

        return SetValue.of_constant(result)  # raises GraphBreak for unhashable or NaN members
    if isinstance(result, torch.Size):
        return SizeValue([ConstantValue(d) for d in result])
    if type(result) is types.UnionType and all(type(a) is type for a in result.__args__):
        return ConstantValue(result)  # ``int | str``: immutable, hashable
    if is_enum_member(result):
        # ``Perm.R | Perm.W``: a member (a Flag's combination is made once and kept by its class).
        from .enums import EnumMemberValue

        return EnumMemberValue(result)
    if type(result).__module__ == "numpy":
        from .numpy_ns import numpy_constant

        return numpy_constant(result, what)
    if is_literal(result) or type(result) in (tuple, list, dict) and _all_literal(result):
        if type(result) is list:
            return ListValue([ConstantValue(x) for x in result])
        if type(result) is dict:
            return DictValue({k: ConstantValue(v) for k, v in result.items()})
        return ConstantValue(result)
    if type(result) in (tuple, list):
        items = [wrap_constant_result(r, what) for r in result]
        return TupleValue(items) if type(result) is tuple else ListValue(items)
    raise GraphBreak(f"{what} returned a {type(result).__name__}, which is not a constant")


def _all_literal(x) -> bool:
    if type(x) is dict:
        return all(is_literal(k) and is_literal(v) for k, v in x.items())
    return all(is_literal(i) for i in x)
