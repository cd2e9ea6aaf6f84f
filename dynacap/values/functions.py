"""Callables: user functions (inlined), bound methods, modules, opaque callables, ``functools.partial``.

``UserFunctionValue.call`` inlines the function's bytecode through the
tracer (``tx.inline_call``); a function made in the trace is rebuilt after
the graph with its closure.  Builtins run at capture time when their
inputs are constants and are otherwise handled case by case in
``values.builtins``; methods of constants and containers are
``values.methods`` and ``values.container_methods``.
"""
from __future__ import annotations

import functools
import sys
import types
from dataclasses import dataclass

from ..errors import GraphBreak
from ..skipfiles import is_installed_library
from .base import DELETED, Value, constant_args
from .constant import ConstantValue
from .context_managers import call_context_function


@dataclass
class MadeFunction:
    """What ``MAKE_FUNCTION`` put into a function made while tracing, to rebuild it at run time."""

    code: types.CodeType
    f_globals: dict
    defaults: Value | None
    kwdefaults: Value | None
    #: ``__annotations__``: one dict per function, the same object on every read.
    annotations: Value
    #: Whether the defaults are all constants (the trace-time function then holds them for real).
    constant_defaults: bool = True


class UserFunctionValue(Value):
    """A Python function whose bytecode can be inlined."""

    def __init__(self, fn: types.FunctionType, source=None, closure_cells=None, made: MadeFunction | None = None):
        self.fn = fn
        self.source = source
        #: For functions made while tracing (``MAKE_FUNCTION``): the tracer's cell boxes.
        self.closure_cells = closure_cells
        #: For functions made while tracing: their parts (a new function object on every run).
        self.made = made
        #: May be inlined although it is torch's code (a built-in layer's method reached by super()).
        self.library_ok = False
        #: False when the function is guarded by its code, not identity (see ``wrap._guard_by_parts``).
        self.identity_known = True
        #: For functions made while tracing: ``__name__``/``__qualname__``/``__module__``/``__doc__`` assigned
        #: (``functools.wraps``), and the function's ``__dict__`` (a DictValue, made on first use).
        self.assigned: dict[str, Value] = {}
        self.namespace = None

    def describe(self) -> str:
        return f"function {self.fn.__qualname__}"

    def python_type(self):
        return types.FunctionType

    def truth(self, tx) -> bool:
        return True  # functions define neither __bool__ nor __len__

    def real_object(self):
        if self.closure_cells is not None or (self.made is not None and not self.made.constant_defaults):
            raise GraphBreak(f"{self.describe()} was created while capturing")
        if not self.identity_known:
            raise GraphBreak(f"{self.describe()} is a different object on each call (only its code is guarded)")
        return self.fn

    def getattr(self, tx, name):
        made = self.made
        if made is None and self.identity_known:
            stored = tx.attribute_override(self.fn, name)  # assigned earlier in this trace
            if stored is not None:
                if stored is DELETED:
                    raise GraphBreak(f"attribute `.{name}` of {self.describe()} was deleted while capturing")
                return stored
            namespace = self._frame_namespace(tx)
            if namespace is not None and name not in _FUNCTION_DESCRIPTORS:
                # ``fn.__dict__`` was read in this trace (and may have changed there): it answers.
                if name in namespace.items:
                    return namespace.items[name]
                if name in self.fn.__dict__:
                    raise GraphBreak(f"attribute `.{name}` of {self.describe()} was deleted from its __dict__ "
                                     "while capturing")
            if name == "__dict__" and any(key[0] == id(self.fn) for key in tx.ctx.attribute_overrides):
                raise GraphBreak(f"`.__dict__` of {self.describe()}, whose attributes were assigned while capturing")
        if made is not None and name in self.assigned:
            return self.assigned[name]
        if name in _NAME_SLOTS:
            return ConstantValue(getattr(self.fn, name))
        if name == "__code__":
            return self._code(tx)
        if made is not None:
            if name in ("__defaults__", "__kwdefaults__", "__annotations__"):
                part = {"__defaults__": made.defaults, "__kwdefaults__": made.kwdefaults,
                        "__annotations__": made.annotations}[name]
                return part if part is not None else ConstantValue(None)
            namespace = self._namespace()
            if name == "__dict__":
                return namespace
            if name in namespace.items:
                return namespace.items[name]
            if hasattr(self.fn, name):  # what every function has (``__call__``, ``__globals__``...)
                raise GraphBreak(f"attribute `.{name}` of {self.describe()}")
            from .exceptions import python_error

            raise python_error(AttributeError, f"'function' object has no attribute {name!r}",
                               reason=f"{self.describe()} has no attribute {name!r} (AttributeError at run time)")
        if self.identity_known and (name in self.fn.__dict__ or name in _FRAME_FUNCTION_PARTS):
            # A function attribute (``fn.cache``, ``fn.__wrapped__``) or part (``__dict__``, ``__annotations__``):
            # read through the function.
            from ..source import AttrSource
            from .wrap import wrap

            part = self.fn.__dict__[name] if name in self.fn.__dict__ else getattr(self.fn, name)
            return wrap(tx, part, AttrSource(self.source, name) if self.source is not None else None)
        raise GraphBreak(f"attribute `.{name}` of {self.describe()}")

    def setattr(self, tx, name, value):
        if name in _FIXED_PARTS:
            raise GraphBreak(f"assigning `.{name}` on {self.describe()} (the trace runs the function it was made as)")
        if self.made is None:
            if self.source is None or not self.identity_known:
                super().setattr(tx, name, value)
            namespace = self._frame_namespace(tx)
            if namespace is not None and name not in _FUNCTION_DESCRIPTORS:
                namespace.mutate(tx)  # its final contents are written back after the graph
                namespace.items[name] = value
                return
            tx.record_setattr(self, name, value)  # replayed on the real function after the graph
            return
        if name == "__annotations__":
            self.made.annotations = value
        elif name in _NAME_SLOTS:
            if not (value.is_constant() and isinstance(value.as_constant(), (str, type(None)))):
                raise GraphBreak(f"assigning `.{name}` on {self.describe()} a value that is not a str")
            self.assigned[name] = value
        else:
            namespace = self._namespace()
            namespace.mutate(tx)
            namespace.items[name] = value

    def _frame_namespace(self, tx):
        """A frame function's ``__dict__`` as this trace holds it once read (``fn.__dict__``), else None."""
        from .containers import DictValue

        namespace = tx.ctx.containers.get(id(self.fn.__dict__))
        return namespace if isinstance(namespace, DictValue) else None

    def _namespace(self):
        """The ``__dict__`` of a function made while tracing: its attributes, assigned in the trace."""
        if self.namespace is None:
            from .containers import DictValue

            self.namespace = DictValue({})
        return self.namespace

    def _code(self, tx) -> Value:
        """``fn.__code__``: an immutable constant once the function's code is guarded."""
        code = self.made.code if self.made is not None else self.fn.__code__
        if self.made is None and self.source is not None and self.identity_known:
            from ..source import AttrSource

            # A function's code can be reassigned; a function guarded by its parts has this guard already.
            # (Without a source, the function is one inlining would trust the same way.)
            tx.guards.id_match(AttrSource(self.source, "__code__"), code)
        return ConstantValue(code)

    def call(self, tx, args, kwargs):
        modelled = call_context_function(tx, self, args, kwargs)
        if modelled is not None:
            return modelled
        return tx.inline_call(self, args, kwargs)

    def reconstruct(self, cg) -> None:
        made = self.made
        if made is None or self.source is not None:
            super().reconstruct(cg)
            return
        rebuild = _rebuilt_as(made.code) if self.closure_cells is not None else None
        if rebuild is not None and all(box.peek() is not None for box in self.closure_cells):
            cg.build_once(self, lambda cg: cg.call(rebuild, *(box.peek() for box in self.closure_cells)))
            return
        if self.closure_cells is not None and any(_built_around(box.peek(), self) for box in self.closure_cells):
            raise GraphBreak(f"{self.describe()} is held by a list or dict in its own closure: it cannot be rebuilt "
                             "after the graph")
        if self.closure_cells is not None and (is_installed_library(made.code.co_filename)
                                               or not all(_new_cell_ok(box) for box in self.closure_cells)):
            # A library's closure (dynacap's models included) holds state its own objects rebuilt here would
            # not be: kept as a break.
            raise GraphBreak(f"{self.describe()} (a closure created while capturing) cannot be rebuilt after "
                             "the graph")
        # One runtime function per traced one, however many places hold it (``return h, h``).
        if cg.load_shared(self):
            return
        new_cells = self._build(cg)
        cg.keep_shared(self)
        for box in new_cells:  # filled once the function is shared: the contents may hold it (recursion)
            _fill_cell(cg, box)
        cg.load_shared(self)

    def _build(self, cg) -> list:
        """``types.FunctionType(code, globals, None, defaults, closure)``, then its kwdefaults and annotations;
        the cells it made (still empty)."""
        made = self.made
        cg.append("PUSH_NULL")
        cg.load_const(types.FunctionType)
        cg.load_const(made.code)
        cg.load_const(made.f_globals)
        cg.load_const(None)
        if made.defaults is not None:
            made.defaults.reconstruct(cg)
        else:
            cg.load_const(None)
        new_cells = []
        if self.closure_cells is not None:
            for box in self.closure_cells:
                if not cg.load_shared(box):
                    cg.call(types.CellType)
                    cg.keep_shared(box)
                    cg.load_shared(box)
                    new_cells.append(box)
            cg.append("BUILD_TUPLE", len(self.closure_cells))
        else:
            cg.load_const(None)
        cg.append("PRECALL", 5)
        cg.append("CALL", 5)
        parts = [("__kwdefaults__", made.kwdefaults), ("__annotations__", made.annotations), *self.assigned.items(),
                 *(self.namespace.items.items() if self.namespace is not None else ())]
        for name, part in parts:
            if part is None:
                continue
            cg.append("COPY", 1)
            part.reconstruct(cg)
            cg.append("SWAP", 2)
            cg.append("STORE_ATTR", name)
        return new_cells


def _built_around(contents: Value | None, function: Value, depth: int = 0) -> bool:
    """Whether ``contents`` is a list, tuple or dict made in the trace that holds ``function`` (at any depth):
    such a container is built with its items before it exists, so the cell filled after the function would get
    a second copy of it."""
    from .containers import DictValue, SequenceValue

    if contents is function:
        return depth > 0  # the function itself in its cell (recursion): made before the cell is filled
    if depth > 20 or getattr(contents, "source", True) is not None:
        return False
    if isinstance(contents, SequenceValue):
        items = contents.items
    elif isinstance(contents, DictValue):
        items = list(contents.items.values())
    else:
        return False
    return any(_built_around(item, function, depth + 1) for item in items)


def _rebuilt_as(code: types.CodeType):
    """For a function ``operator``'s models make (``models.operators``: ``itemgetter``'s ``get_items``...), the
    real C callable eager holds, made again from the function's cells' contents (``co_freevars`` order);
    None for any other code."""
    if not _REBUILT:
        import operator

        from ..models import operators as models

        def made_by(model, name):
            return next(c for c in model.__code__.co_consts if isinstance(c, types.CodeType) and c.co_name == name)

        _REBUILT.update({
            made_by(models.itemgetter, "get_item"): operator.itemgetter,
            made_by(models.itemgetter, "get_items"): _itemgetter_of,
            made_by(models.attrgetter, "get_attr"): _attrgetter_of,
            made_by(models.attrgetter, "get_attrs"): _attrgetter_of_paths,
            made_by(models.methodcaller, "call_method"): _methodcaller_of,
        })
        assert [c.co_freevars for c in _REBUILT] == [("item",), ("items",), ("path",), ("paths",),
                                                      ("args", "kwargs", "name")], "models.operators changed"
    return _REBUILT.get(code)


_REBUILT: dict = {}


def _itemgetter_of(items):
    import operator

    return operator.itemgetter(*items)


def _attrgetter_of(path):
    import operator

    return operator.attrgetter(".".join(path))


def _attrgetter_of_paths(paths):
    import operator

    return operator.attrgetter(*(".".join(path) for path in paths))


def _methodcaller_of(args, kwargs, name):
    import operator

    return operator.methodcaller(name, *args, **kwargs)


def _new_cell_ok(box) -> bool:
    """Whether a new cell may stand for ``box`` after the graph: the frame that made the cell returned in
    the trace (``interpreter.ops_variables.FrameCell``), so no code but the rebuilt closures holds it.  A
    cell that exists at run time (a free variable of the frame), or one of a frame that goes on after a
    break (its resume makes its own cells), is shared with code the new cell would not be seen by."""
    returned = getattr(box, "frame_returned", None)
    return returned is not None and returned()


def _fill_cell(cg, box) -> None:
    """``cell.cell_contents = contents`` for a new cell standing for ``box`` (left empty where the variable
    is unbound; a class being made now, the function one of its own, fills it once it is made)."""
    contents = box.peek()
    if contents is None and not box.unread():
        return  # unbound, or deleted (``del x``): eager's cell is empty too
    if getattr(contents, "building", False):
        contents.pending_cells.append(box)  # ``classes.MadeClassValue.reconstruct``
        return
    if contents is None:
        cg.load_source(box.source)  # never read in the trace: the argument the frame was called with
    else:
        contents.reconstruct(cg)
    cg.load_shared(box)
    cg.append("STORE_ATTR", "cell_contents")


#: A function's name parts: read from the function object (a str, or None for ``__doc__``).
_NAME_SLOTS = ("__name__", "__qualname__", "__module__", "__doc__")
#: Parts of a function from the frame read through their source (containers the trace may read or change).
_FRAME_FUNCTION_PARTS = ("__dict__", "__annotations__", "__defaults__", "__kwdefaults__")
#: Names a function's type answers before its ``__dict__`` (data descriptors: slots and getsets).
_FUNCTION_DESCRIPTORS = frozenset(name for name, attr in vars(types.FunctionType).items()
                                  if hasattr(attr, "__set__") or hasattr(attr, "__delete__"))
#: Parts whose assignment would change what the trace inlines: a break.
_FIXED_PARTS = ("__code__", "__defaults__", "__kwdefaults__", "__dict__", "__closure__", "__globals__")


class BoundMethodValue(Value):
    """``obj.method`` where ``method`` is a user function: calls it with ``obj`` first."""

    def __init__(self, function: UserFunctionValue, self_value: Value, source=None):
        self.function = function
        self.self_value = self_value
        self.source = source

    def describe(self) -> str:
        return f"method {self.function.fn.__qualname__}"

    def call(self, tx, args, kwargs):
        return self.function.call(tx, [self.self_value, *args], kwargs)

    def getattr(self, tx, name):
        # ``method_getattro``: the method type's own attributes, then the function's (``m.__name__``).
        if name == "__self__":
            return self.self_value
        if name == "__func__":
            return self.function
        if name == "__doc__" or not any(name in k.__dict__ for k in types.MethodType.__mro__):
            return self.function.getattr(tx, name)
        return super().getattr(tx, name)

    def reconstruct(self, cg) -> None:
        if self.source is not None:
            cg.extend(self.source.emit())
            return
        cg.append("PUSH_NULL")
        cg.load_const(types.MethodType)
        self.function.reconstruct(cg)
        self.self_value.reconstruct(cg)
        cg.append("PRECALL", 2)
        cg.append("CALL", 2)


class PythonModuleValue(Value):
    """A non-torch Python module (``math``, ``operator``, a user module)."""

    def __init__(self, module: types.ModuleType, source=None):
        self.module = module
        self.source = source

    def describe(self):
        return f"module {self.module.__name__}"

    def real_object(self):
        return self.module

    def getattr(self, tx, name):
        from ..source import AttrSource
        from .wrap import wrap

        if not hasattr(self.module, name):
            raise GraphBreak(f"module {self.module.__name__} has no attribute {name!r}")
        source = AttrSource(self.source, name) if self.source is not None else None
        return wrap(tx, getattr(self.module, name), source)


class OpaqueCallableValue(Value):
    """A callable known by identity (a C builtin, ``math.sqrt``...) that runs on constants only."""

    def __init__(self, fn, source=None):
        self.fn = fn
        self.source = source

    def describe(self):
        name = getattr(self.fn, "__qualname__", None) or getattr(self.fn, "__name__", None)
        if not isinstance(name, str):  # a callable object (a cmp_to_key key): named by its class, never its address
            return f"`{type(self.fn).__module__}.{type(self.fn).__qualname__}` object"
        module = getattr(self.fn, "__module__", None)
        return f"`{module + '.' if module and module != 'builtins' else ''}{name}`"

    def real_object(self):
        return self.fn

    def call(self, tx, args, kwargs):
        if self.fn is sys.exc_info or self.fn is sys.exception:
            from .exceptions import handled_exception

            return handled_exception(tx, self.fn, args, kwargs)
        instance_call = _modelled_instance_call(tx, self.fn)
        if instance_call is not None:
            return instance_call.call(tx, args, kwargs)
        if _is_pure(self.fn):
            const = constant_args(args, kwargs)
            if const is not None:
                from .wrap import wrap_constant_result

                return wrap_constant_result(self.fn(*const[0], **const[1]), self.describe())
        if type(self.fn) is functools._lru_cache_wrapper:
            raise GraphBreak(f"call to {self.describe()}, a functools.lru_cache function: its cache must see every "
                             "call (its statistics, the effects of a miss), so it runs eagerly")
        raise GraphBreak(
            f"call to {self.describe()}, a function dynacap cannot look inside; "
            "it runs eagerly (wrap it with dynacap.disable, or use a torch operation instead)"
        )


def _modelled_instance_call(tx, obj) -> Value | None:
    """An object of a C callable class whose call is modelled (``operator.itemgetter(1)`` from the frame): the
    model of its constructor, called with the object's own ``__reduce__`` arguments (it is guarded by identity,
    so they are fixed), gives the function its call is traced as.  None for other objects."""
    from ..models.operators import INSTANCE_CALLS

    constructor = INSTANCE_CALLS.get(type(obj))
    if constructor is None:
        return None
    from .wrap import wrap

    factory, args = obj.__reduce__()
    kwargs = {}
    if type(factory) is functools.partial:  # ``methodcaller(name, **kwargs)`` reduces to a partial
        args, kwargs = factory.args + args, factory.keywords
    return wrap(tx, constructor, None).call(tx, [wrap(tx, a, None) for a in args],
                                            {k: wrap(tx, v, None) for k, v in kwargs.items()})


def _is_pure(fn) -> bool:
    module = getattr(fn, "__module__", None) or getattr(getattr(fn, "__self__", None), "__name__", None)
    # (No ``==`` on ``fn``: a cmp_to_key key raises there.)
    return module in ("math", "_operator", "operator", "cmath") or _library_cache(fn)


def _library_cache(fn) -> bool:
    """A library function behind ``functools.lru_cache``/``cache`` (transformers' version checks): its author
    promises a result that depends on the arguments only, and nothing reads its statistics, so it is called
    once, at capture time.  The user's own cached functions run eagerly: their cache's statistics and the
    effects of a miss must see every call (a capture-time call would be their only one)."""
    from ..skipfiles import is_installed_library

    if type(fn) is not functools._lru_cache_wrapper:
        return False
    code = getattr(getattr(fn, "__wrapped__", None), "__code__", None)
    return isinstance(code, types.CodeType) and is_installed_library(code.co_filename)


class PartialValue(Value):
    """``functools.partial(func, *args, **keywords)``: calling it calls ``func`` with the stored arguments first.

    One read from the frame is guarded by its type and its parts (``func``, ``args``, ``keywords``
    through their sources); one made in the trace is rebuilt as ``functools.partial(...)``.
    """

    def __init__(self, func: Value, args: Value, keywords: Value, source=None):
        self.func = func
        self.args = args  # a TupleValue
        self.keywords = keywords  # a DictValue with str keys
        self.source = source

    def describe(self):
        return f"functools.partial({self.func.describe()}, ...)"

    def python_type(self):
        return functools.partial

    def getattr(self, tx, name):
        if name == "func":
            return self.func
        if name == "args":
            return self.args
        if name == "keywords":
            return self.keywords
        return super().getattr(tx, name)

    def call(self, tx, args, kwargs):
        return self.func.call(tx, list(self.args.iterate(tx)) + list(args),
                              {**{k: v for k, v in self.keywords.items.items()}, **kwargs})

    def reconstruct(self, cg) -> None:
        if self.source is not None:
            cg.extend(self.source.emit())
            return
        cg.append("PUSH_NULL")
        cg.load_const(functools.partial)
        self.func.reconstruct(cg)
        for arg in self.args.items:
            arg.reconstruct(cg)
        names = tuple(self.keywords.items)
        for value in self.keywords.items.values():
            value.reconstruct(cg)
        if names:
            cg.append("KW_NAMES", names)
        cg.append("PRECALL", 1 + len(self.args.items) + len(names))
        cg.append("CALL", 1 + len(self.args.items) + len(names))


def make_partial(tx, args: list[Value], kwargs: dict[str, Value]) -> PartialValue:
    """``functools.partial(func, *args, **keywords)`` called in the trace (a partial of a partial flattens)."""
    from .containers import DictValue, TupleValue

    if not args:
        raise GraphBreak("functools.partial() needs a function (TypeError at run time)")
    func, rest = args[0], list(args[1:])
    if isinstance(func, PartialValue):
        return PartialValue(func.func, TupleValue(list(func.args.items) + rest),
                            DictValue({**func.keywords.items, **kwargs}))
    return PartialValue(func, TupleValue(rest), DictValue(dict(kwargs)))
