"""Context managers in ``with`` blocks: what ``BEFORE_WITH`` enters and the ``__exit__`` it pushes.

* grad-mode, autocast and null contexts enter themselves (``.enter(tx)``:
  ``grad_mode``, ``autocast``, ``null_context``);
* objects of user classes whose ``__enter__``/``__exit__`` are Python
  functions: both are inlined (``__exit__(None, None, None)`` on leaving,
  ``__exit__(type, e, tb)`` when an exception of the trace leaves the block,
  which it swallows by returning true);
* ``contextlib.contextmanager`` functions: the generator runs to its
  ``yield`` on entering, on leaving it runs to its end, or has the
  exception thrown in at the ``yield`` (``GeneratorContextValue``);
* ``contextlib.nullcontext``, ``contextlib.suppress``, ``contextlib.ExitStack``
  (``enter_context``, ``callback``) and ``warnings.catch_warnings()``, modelled.

An ``__exit__`` that exists at run time (a user object from the frame) is
rebuilt when a break inside the block resumes there; the others never
exist at run time, so a break inside their block runs the frame eagerly.
"""
from __future__ import annotations

import contextlib
import functools
import types
import warnings

from ..errors import GraphBreak
from .base import Value
from .constant import ConstantValue
from .base import constant_args
from .exceptions import ExceptionValue, PythonError, TracebackValue, python_error


def enter_context(tx, manager: Value) -> tuple[Value, Value]:
    """Enter ``manager`` (``BEFORE_WITH``, ``ExitStack.enter_context``): its ``__exit__`` and its ``__enter__``'s result."""
    from .objects import ObjectValue

    enter = getattr(manager, "enter", None)
    if enter is None:
        if not isinstance(manager, ObjectValue):
            raise GraphBreak(f"`with` on {manager.describe()} is not captured; the block's code around it runs "
                             "eagerly")
        enter = functools.partial(_enter_object, manager=manager)
    result = enter(tx)  # it pushed its __exit__
    return tx.pop(), result


def _enter_object(tx, manager) -> Value:
    from .objects import class_lookup, guard_class_attribute

    cls = manager.python_type()
    enter_fn, exit_fn = class_lookup(cls, "__enter__"), class_lookup(cls, "__exit__")
    for name, fn in (("__enter__", enter_fn), ("__exit__", exit_fn)):
        if type(fn) is not types.FunctionType:
            raise GraphBreak(f"`with` on {manager.describe()}, whose class has no Python {name}")
        if not _is_user_code(fn):
            # torch's own (a TorchFunctionMode, saved_tensors_hooks...) switch global state.
            raise GraphBreak(f"`with` on {manager.describe()}, whose {name} is {fn.__module__}'s: it runs eagerly")
    guard_class_attribute(tx, manager, manager.obj, "__exit__", exit_fn)
    tx.push(ObjectExitValue(manager, exit_fn))
    return manager.call_special(tx, "__enter__", [], "`with`")


class ObjectExitValue(Value):
    """The bound ``__exit__`` of a user object in a ``with`` block."""

    #: Its block is a handler: an operation raising inside it runs user code (``Tracer.inside_try``).
    handles_exceptions = True

    def __init__(self, manager: Value, fn: types.FunctionType):
        self.manager = manager
        self.fn = fn

    def describe(self):
        return f"__exit__ of {self.manager.describe()}"

    def call(self, tx, args, kwargs):
        from .functions import UserFunctionValue

        return UserFunctionValue(self.fn).call(tx, [self.manager, *args], kwargs)

    def reconstruct(self, cg):
        """``types.MethodType(type(obj).__exit__, obj)``: what ``BEFORE_WITH`` pushed, for a frame object."""
        if self.manager.source is None:
            raise GraphBreak(f"a graph break inside a `with` block on {self.manager.describe()} (made while "
                             "capturing): the function runs eagerly")
        cg.call(types.MethodType, self.fn, self.manager)


class _ModelExitValue(Value):
    """The ``__exit__`` of a context manager modelled here: never exists at run time."""

    def __init__(self, manager: "ModelledContextValue"):
        self.manager = manager
        self.handles_exceptions = manager.handles_exceptions

    def describe(self):
        return f"__exit__ of {self.manager.describe()}"

    def call(self, tx, args, kwargs):
        if kwargs or len(args) != 3:
            raise GraphBreak(f"{self.describe()} called with {len(args)} arguments")
        exception = args[1]
        if not isinstance(exception, ExceptionValue):
            exception = None
        return self.manager.exit(tx, exception)

    def reconstruct(self, cg):
        """A stateless manager's ``__exit__`` is a fresh one's; a generator's exists only in the capture."""
        if not self.manager.stateless:
            raise GraphBreak(f"a graph break inside a `with {self.manager.describe()}` block (it exists only in "
                             "the capture): the function runs eagerly")
        self.manager.reconstruct(cg)
        cg.append("LOAD_ATTR", "__exit__")


class ModelledContextValue(Value):
    """A context manager of the standard library, modelled: ``enter`` and ``exit(exception or None)``."""

    #: Whether its ``__exit__`` reads no state its ``__enter__`` made (a fresh one's is as good).
    stateless = False
    #: Whether its ``__exit__`` runs code or swallows exceptions (``Tracer.inside_try``).
    handles_exceptions = True

    def enter(self, tx) -> Value:
        tx.push(_ModelExitValue(self))
        return self.on_enter(tx)

    def on_enter(self, tx) -> Value:
        return ConstantValue(None)

    def exit(self, tx, exception: ExceptionValue | None) -> Value:
        return ConstantValue(False)


class NullcontextValue(ModelledContextValue):
    """``contextlib.nullcontext(enter_result)``."""

    stateless = True
    handles_exceptions = False

    def __init__(self, enter_result: Value):
        self.enter_result = enter_result

    def describe(self):
        return "contextlib.nullcontext(...)"

    def python_type(self):
        return contextlib.nullcontext

    def on_enter(self, tx):
        return self.enter_result

    def reconstruct(self, cg):
        cg.append("PUSH_NULL")
        cg.load_const(contextlib.nullcontext)
        self.enter_result.reconstruct(cg)
        cg.append("PRECALL", 1)
        cg.append("CALL", 1)


class SuppressValue(ModelledContextValue):
    """``contextlib.suppress(*classes)``: swallows an exception of the block that is one of them."""

    stateless = True

    def __init__(self, classes: tuple):
        self.classes = classes

    def describe(self):
        return f"contextlib.suppress({', '.join(c.__qualname__ for c in self.classes)})"

    def python_type(self):
        return contextlib.suppress

    def exit(self, tx, exception):
        return ConstantValue(exception is not None and issubclass(exception.cls, self.classes))

    def reconstruct(self, cg):
        cg.append("PUSH_NULL")
        cg.load_const(contextlib.suppress)
        for cls in self.classes:
            cg.load_const(cls)
        cg.append("PRECALL", len(self.classes))
        cg.append("CALL", len(self.classes))


class GeneratorContextValue(ModelledContextValue):
    """A ``contextlib.contextmanager`` function called: the generator is made and run when entered."""

    def __init__(self, helper: Value, fn: Value, args: list[Value], kwargs: dict[str, Value]):
        self.helper = helper  # the function contextmanager returned
        self.fn = fn
        self.args = args
        self.kwargs = kwargs
        self.generator = None

    def reconstruct(self, cg):
        """Not entered yet (a break at its ``with``): a fresh one, made by the same call."""
        if self.generator is not None or self.kwargs:
            raise GraphBreak(f"{self.describe()} made while capturing cannot be rebuilt after the graph")
        cg.append("PUSH_NULL")
        self.helper.reconstruct(cg)
        for arg in self.args:
            arg.reconstruct(cg)
        cg.append("PRECALL", len(self.args))
        cg.append("CALL", len(self.args))

    def describe(self):
        return f"{self.fn.fn.__qualname__}() (a contextlib.contextmanager)"

    def python_type(self):
        return contextlib._GeneratorContextManager

    def on_enter(self, tx):
        from .iterators import GeneratorValue

        if self.generator is not None:
            raise GraphBreak(f"entering {self.describe()} twice (RuntimeError at run time)")
        calling, tx.calling = tx.calling, False
        try:
            generator = self.fn.call(tx, self.args, self.kwargs)
        finally:
            tx.calling = calling
        if not isinstance(generator, GeneratorValue):
            raise GraphBreak(f"{self.describe()} does not return an inlined generator")
        # Its `yield` may sit in a try block: this block's exit runs the handler, in the trace.
        generator.tracer.managed = True
        self.generator = generator
        try:
            item = generator.next_item(tx)
        except GraphBreak as e:
            if not isinstance(e, PythonError):
                self.generator = None  # a break resumes before the `with`, where it is not entered yet
            raise
        if item is None:
            raise python_error(RuntimeError, "generator didn't yield")
        return item

    def exit(self, tx, exception):
        generator = self.generator
        if exception is None:
            if generator.next_item(tx) is not None:
                raise python_error(RuntimeError, "generator didn't stop")
            return ConstantValue(False)
        if exception.cls is StopIteration or issubclass(exception.cls, (StopIteration, GeneratorExit)):
            raise GraphBreak(f"{exception.describe()} thrown into {self.describe()} is not captured")
        try:
            generator.throw(tx, exception)
        except PythonError as e:
            if e.exception is exception:
                return ConstantValue(False)  # the same exception: the with block re-raises it
            if issubclass(e.exception.cls, (StopIteration, RuntimeError)):
                raise GraphBreak(f"{e.exception.describe()} raised by {self.describe()} is not captured") from None
            raise
        if not generator.done:
            raise python_error(RuntimeError, "generator didn't stop after throw()")
        return ConstantValue(True)


def call_context_function(tx, fn_value, args, kwargs) -> Value | None:
    """Calling a function ``contextlib.contextmanager`` made, or one that sets warning filters (else None)."""
    fn = fn_value.fn
    if fn in _FILTER_SETTERS:
        return set_warning_filters(tx, fn_value, args, kwargs)
    if fn.__code__ is not _CONTEXTMANAGER_HELPER or fn_value.made is not None:
        return None
    func = fn.__closure__[0].cell_contents  # the decorated generator function ``helper`` closes over
    if type(func) is not types.FunctionType:
        raise GraphBreak(f"contextlib.contextmanager over {type(func).__name__} is not captured")
    from .functions import UserFunctionValue

    if not _is_user_code(func):
        # torch's and the libraries' own (``torch.random.fork_rng``...) switch global state: they break
        # at the call as before.
        return None

    return GeneratorContextValue(fn_value, UserFunctionValue(func), args, kwargs)


def make_modelled(cls: type, args: list[Value], kwargs: dict[str, Value]) -> Value | None:
    """``contextlib.nullcontext(...)`` / ``contextlib.suppress(...)`` (None: ``cls`` is neither)."""
    if cls is contextlib.nullcontext:
        if kwargs and set(kwargs) != {"enter_result"} or len(args) + len(kwargs) > 1:
            raise GraphBreak("contextlib.nullcontext() takes one optional argument (TypeError at run time)")
        return NullcontextValue(args[0] if args else kwargs.get("enter_result", ConstantValue(None)))
    if cls is contextlib.suppress:
        from .exceptions import is_exception_class

        if kwargs or not all(is_exception_class(a) for a in args):
            raise GraphBreak("contextlib.suppress() of values other than exception classes is not captured")
        return SuppressValue(tuple(a.as_constant() for a in args))
    if cls is contextlib.ExitStack:
        if args or kwargs:
            raise GraphBreak("contextlib.ExitStack() takes no arguments (TypeError at run time)")
        return ExitStackValue()
    if cls is warnings.catch_warnings:
        if args or any(k not in ("record", "module") for k in kwargs) or \
                not all(v.is_constant() and not v.as_constant() for v in kwargs.values()):
            raise GraphBreak("warnings.catch_warnings(record=True or module=...) is not captured")
        return CatchWarningsValue()
    return None


class ExitStackValue(ModelledContextValue):
    """``contextlib.ExitStack()``: ``enter_context(cm)`` and ``callback(fn, ...)``, left in reverse order."""

    def __init__(self):
        #: Per registration: ``("exit", __exit__ value)`` or ``("callback", (fn, args, kwargs))``.
        self.exits: list[tuple[str, object]] = []

    def describe(self):
        return "contextlib.ExitStack()"

    def python_type(self):
        return contextlib.ExitStack

    def on_enter(self, tx):
        return self

    def getattr(self, tx, name):
        if name in ("enter_context", "callback", "pop_all", "close"):
            return _ExitStackMethod(self, name)
        return super().getattr(tx, name)

    def exit(self, tx, exception):
        received, suppressed = exception is not None, False
        calling, tx.calling = tx.calling, False
        try:
            while self.exits:
                kind, item = self.exits.pop()
                if kind == "callback":
                    fn, args, kwargs = item
                    fn.call(tx, list(args), dict(kwargs))
                    continue
                details = [ConstantValue(None)] * 3 if exception is None else \
                    [ConstantValue(exception.cls), exception, TracebackValue()]
                if item.call(tx, details, {}).truth(tx) and exception is not None:
                    suppressed, exception = True, None
        except PythonError as e:
            # ExitStack re-chains the contexts of what its callbacks raise: not modelled.
            raise GraphBreak(f"{e.exception.describe()} raised while leaving {self.describe()} is not "
                             "captured") from None
        finally:
            tx.calling = calling
        return ConstantValue(received and suppressed)


class _ExitStackMethod(Value):
    def __init__(self, stack: ExitStackValue, name: str):
        self.stack = stack
        self.name = name

    def describe(self):
        return f"ExitStack.{self.name}"

    def call(self, tx, args, kwargs):
        if self.name == "enter_context":
            if len(args) != 1 or kwargs:
                raise GraphBreak("ExitStack.enter_context takes one argument (TypeError at run time)")
            exit_value, result = enter_context(tx, args[0])
            self.stack.exits.append(("exit", exit_value))
            return result
        if self.name in ("pop_all", "close"):
            if args or kwargs:
                raise GraphBreak(f"ExitStack.{self.name} takes no arguments (TypeError at run time)")
            if self.name == "close":
                self.stack.exit(tx, None)
                return ConstantValue(None)
            moved = ExitStackValue()  # the registrations move to a new stack; this one is left empty
            moved.exits, self.stack.exits = self.stack.exits, []
            return moved
        if not args:
            raise GraphBreak("ExitStack.callback needs a function (TypeError at run time)")
        self.stack.exits.append(("callback", (args[0], args[1:], kwargs)))
        return args[0]


class CatchWarningsValue(ModelledContextValue):
    """``warnings.catch_warnings()``: the filters the block sets (``simplefilter``...) are undone on leaving.

    The trace enters a real one (left when the trace ends, whatever happens), so warnings
    given while tracing follow the block's filters; calls that set filters inside it run then.
    The compiled graph does not switch filters: a warning a graph operation gives at run time
    is filtered as outside the block.
    """

    #: Its exit restores the filters only, which the graph never changes.
    handles_exceptions = False

    def __init__(self):
        self.real = None

    def describe(self):
        return "warnings.catch_warnings()"

    def python_type(self):
        return warnings.catch_warnings

    def on_enter(self, tx):
        if self.real is not None:
            raise GraphBreak(f"entering {self.describe()} twice (RuntimeError at run time)")
        self.real = warnings.catch_warnings()
        self.real.__enter__()
        tx.ctx.autocasts.append(self.real)
        return ConstantValue(None)

    def exit(self, tx, exception):
        if not tx.ctx.autocasts or tx.ctx.autocasts[-1] is not self.real:
            raise GraphBreak("with-blocks exited out of order")
        tx.ctx.autocasts.pop().__exit__(None, None, None)
        return ConstantValue(False)


#: Functions that set warning filters: run at capture time inside a captured ``catch_warnings`` block.
_FILTER_SETTERS = (warnings.simplefilter, warnings.filterwarnings, warnings.resetwarnings)


def set_warning_filters(tx, fn_value, args, kwargs) -> Value | None:
    """``warnings.simplefilter(...)`` and friends inside ``with warnings.catch_warnings()`` (else None)."""
    if fn_value.fn not in _FILTER_SETTERS or fn_value.made is not None:
        return None
    if not any(isinstance(c, warnings.catch_warnings) for c in tx.ctx.autocasts):
        return None
    const = constant_args(args, kwargs)
    if const is None:
        raise GraphBreak(f"warnings.{fn_value.fn.__name__}() with arguments not known at capture time")
    try:
        fn_value.fn(*const[0], **const[1])
    except Exception as e:
        from .exceptions import from_real

        raise from_real(e, f"warnings.{fn_value.fn.__name__}() raised {type(e).__name__}: {e}") from None
    return ConstantValue(None)


def _is_user_code(fn: types.FunctionType) -> bool:
    """Not torch's nor a library's: no trace rule names it and its file is captured."""
    from .. import trace_rules
    from ..skipfiles import is_skipped_file

    return trace_rules.rule_for_code(fn.__code__) is None and not is_skipped_file(fn.__code__.co_filename)


_CONTEXTMANAGER_HELPER = contextlib.contextmanager(lambda: None).__code__
