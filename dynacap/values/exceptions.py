"""Exception objects in captured code, and ``PythonError``: Python raising one while tracing.

``ExceptionValue`` stands for an instance of an exception class made in the
trace (``ValueError("bad")``, a user subclass without its own ``__init__``/
``__new__``, or what a builtin raised on constants): its class, its ``args``,
``__cause__``/``__context__``/``__suppress_context__`` and attributes the
code assigns.  ``PythonError`` carries one: it is what a value kind or an
opcode raises where Python would raise at run time.  It is a ``GraphBreak``,
so every caller that does not model exceptions keeps treating it as a break;
the tracer's main loop unwinds it into the frame's exception table when a
handler protects the instruction (``interpreter.tracer.Tracer.catch``).

An exception never exists at run time: one that the code after the graph
would need (returned, stored, live across a break) cannot be rebuilt, so the
frame runs eagerly.  Nothing here imports the interpreter.
"""
from __future__ import annotations

import types

from ..errors import GraphBreak
from .base import Value
from .constant import ConstantValue


class CallersException(Value):
    """The exception the root frame's caller is handling when the frame starts (unknown at capture time).

    It is what ``PUSH_EXC_INFO`` saves in the root frame's first handler and what a bare ``raise``
    outside any traced handler would re-raise.
    """

    def describe(self):
        return "the exception being handled when the function was called"

    def reconstruct(self, cg):
        raise GraphBreak("a graph break inside an except/finally handler that runs on an exception raised "
                         "while capturing: the function runs eagerly")


CALLERS = CallersException()


def callers_exception(tx) -> Value:
    """What the root frame's caller is handling: None (guarded) when it handles nothing, else ``CALLERS``.

    Read now, the thread's handled exception is the caller's unless the capture itself runs inside an
    ``except`` block (then it is not None, and the answer stays unknown).  The guard reads it where the
    frame starts, which is the caller's.
    """
    import sys

    if sys.exception() is not None:
        return CALLERS
    tx.guards.add("GLOBAL_STATE", None, "{exception}() is None", "the caller is handling no exception",
                  exception=sys.exception)
    return ConstantValue(None)


class TracebackValue(Value):
    """The traceback of an exception raised in the trace (``__exit__``'s third argument)."""

    def describe(self):
        return "a traceback"

    def python_type(self):
        return types.TracebackType

    def truth(self, tx):
        return True

    def reconstruct(self, cg):
        raise GraphBreak("a traceback of an exception raised while capturing cannot be used after the graph")


def _builtin_text(cls: type) -> bool:
    """Whether ``str()``/``repr()`` of ``cls``'s instances are the C ones of ``BaseException`` (no user code)."""
    for name in ("__str__", "__repr__"):
        for klass in cls.__mro__:
            if name in klass.__dict__:
                if klass.__module__ != "builtins":
                    return False
                break
    return True


def why_not_plain(cls: type) -> str | None:
    """Why instances of the exception class ``cls`` cannot be made in the trace (None: they can).

    A Python ``__init__`` is inlined; hooks that would run on every attribute access are refused.
    """
    for klass in cls.__mro__:
        if klass.__module__ == "builtins":
            continue
        for name in ("__new__", "__getattribute__", "__getattr__", "__setattr__", "__delattr__"):
            if name in klass.__dict__:
                return f"its class {klass.__qualname__} defines {name}"
        if "__init__" in klass.__dict__ and type(klass.__dict__["__init__"]) is not types.FunctionType:
            return f"its class {klass.__qualname__} has a {type(klass.__dict__['__init__']).__name__} __init__"
    return None


def user_init(cls: type):
    """The Python ``__init__`` that ``cls(...)`` runs (None: a builtin exception class's own)."""
    for klass in cls.__mro__:
        if "__init__" in klass.__dict__:
            init = klass.__dict__["__init__"]
            return init if type(init) is types.FunctionType else None
    return None


class ExceptionValue(Value):
    """An exception instance made or raised in the trace."""

    def __init__(self, cls: type, args: list[Value], class_source=None):
        self.cls = cls
        self.args = list(args)
        #: Where the class was read from (its class attributes are guarded through it).
        self.class_source = class_source
        self.cause: Value = ConstantValue(None)
        self.suppress_context = False
        #: ``__context__``: None until raised (then the exception being handled, ``CALLERS`` or None).
        self.context: Value | None = None
        self.raised = False
        self.attributes: dict[str, Value] = {}
        #: Stands for its ``__traceback__`` object: a new one each time a ``raise`` raises it (a re-raise
        #: keeps it); groups derived by ``except*`` share their origin's (``PREP_RERAISE_STAR``).
        self.traceback = object()
        #: For a ``StopIteration``: whether ``args`` hold its ``value`` (made by the code, or by a generator's
        #: return, ``iterators.stop_iteration``); a builtin's may stand for a generator's return value.
        self.value_known = False

    def describe(self):
        return f"the exception {self.cls.__qualname__}(...)"

    def python_type(self):
        return self.cls

    def truth(self, tx):
        return True

    def real_object(self):
        raise GraphBreak(f"{self.describe()} made while capturing has no runtime object")

    def reconstruct(self, cg):
        """A fresh ``cls(*args)``: exact for an exception made here and not raised yet (``raise`` run eagerly)."""
        if self.raised or self.attributes or self.suppress_context:
            raise GraphBreak(f"{self.describe()}, raised while capturing, is used after the graph (the "
                             "function runs eagerly)")
        cg.call(self.cls, *self.args)

    def constant_args(self) -> tuple | None:
        if all(a.is_constant() for a in self.args):
            return tuple(a.as_constant() for a in self.args)
        return None

    def to_text(self, tx, conversion: str) -> Value:
        """``str(e)`` / ``repr(e)`` as a value: a class's own ``__str__``/``__repr__`` written in Python is
        inlined (it runs in eager too), else the C text of ``BaseException``."""
        name = f"__{conversion}__"
        for klass in self.cls.__mro__:
            if name in klass.__dict__:
                method = klass.__dict__[name]
                if klass.__module__ == "builtins" or type(method) is not types.FunctionType:
                    break
                from .functions import UserFunctionValue

                calling, tx.calling = tx.calling, False  # its result is not a CALL's
                try:
                    result = UserFunctionValue(method).call(tx, [self], {})
                finally:
                    tx.calling = calling
                if not (result.is_constant() and type(result.as_constant()) is str):
                    raise GraphBreak(f"`{conversion}()` of {self.describe()}: its {name} returned "
                                     f"{result.describe()}")
                return result
        return ConstantValue(self.text(conversion))

    def text(self, conversion: str) -> str:
        """``str(e)`` / ``repr(e)``: the C text of a fresh instance with the same arguments."""
        args = self.constant_args()
        if args is None or not _builtin_text(self.cls):
            raise GraphBreak(f"`{conversion}()` of {self.describe()} (its arguments or its text are not "
                             "known at capture time)")
        instance = BaseException.__new__(self.cls)
        instance.args = args
        return str(instance) if conversion == "str" else repr(instance)

    def getattr(self, tx, name):
        from .containers import TupleValue

        if name in self.attributes:
            return self.attributes[name]
        if name == "args":
            return TupleValue(list(self.args))
        if name == "__cause__":
            return self.cause
        if name == "__suppress_context__":
            return ConstantValue(self.suppress_context)
        if name == "__context__":
            context = self.context if self.context is not None else ConstantValue(None)
            if context is CALLERS:
                context = callers_exception(tx)
            if context is CALLERS:
                raise GraphBreak(f"`__context__` of {self.describe()}: the exception being handled when the "
                                 "function was called is not known at capture time")
            return context
        if name == "__class__":
            return ConstantValue(self.cls)
        if name in ("__str__", "__repr__"):
            return _TextMethod(self, name.strip("_"))
        if name == "add_note":
            return _AddNote(self)
        if name in ("__traceback__", "with_traceback", "add_note", "__notes__"):
            raise GraphBreak(f"`.{name}` of {self.describe()} is not captured")
        for klass in self.cls.__mro__:
            if name in klass.__dict__:
                attr = klass.__dict__[name]
                if klass.__module__ != "builtins" and type(attr) in (int, float, str, bool, type(None)) \
                        and self.class_source is not None:
                    from ..source import AttrSource

                    tx.guards.equals_match(AttrSource(self.class_source, name), attr)
                    return ConstantValue(attr)
                break
        if name == "value" and issubclass(self.cls, StopIteration) and self.value_known:
            return self.args[0] if self.args else ConstantValue(None)
        if not any(name in type.__dict__["__dict__"].__get__(klass) for klass in self.cls.__mro__):
            # Not in its ``__dict__`` (``attributes``: the trace made the object) nor its classes: missing,
            # as ``getattr(e, "code", -1)`` on a ValueError finds it.
            raise AttributeMissing(f"{self.describe()} has no attribute {name!r} (AttributeError at run time)",
                                   message=f"'{tp_name(self.cls):.100}' object has no attribute '{name}'")
        if name in ("errno", "strerror", "filename", "code", "msg", "name", "path", "obj", "value"):
            # Attributes some builtin exception classes set from their arguments.
            raise GraphBreak(f"`.{name}` of {self.describe()} is not captured")
        return super().getattr(tx, name)

    def setattr(self, tx, name, value):
        if name == "__cause__":
            self.cause = value
            self.suppress_context = True
        elif name == "__context__":
            self.context = value
        elif name == "__suppress_context__" and value.is_constant():
            self.suppress_context = bool(value.as_constant())
        elif name.startswith("__") or name == "args":
            raise GraphBreak(f"assigning `.{name}` on {self.describe()} is not captured")
        else:
            self.attributes[name] = value

    def builtin_init(self, owner: type, args: list[Value]) -> Value:
        """``super().__init__(*args)`` reaching a builtin exception class's ``__init__``: it stores ``args``."""
        if owner not in _PLAIN_BUILTINS or owner not in self.cls.__mro__:
            raise GraphBreak(f"{owner.__qualname__}.__init__ on {self.describe()} is not captured")
        self.args = list(args)
        return ConstantValue(None)

    def set_cause(self, cause: Value) -> None:
        """``raise self from cause``."""
        self.cause = cause
        self.suppress_context = True


class _AddNote(Value):
    """``e.add_note(text)``: appends to ``e.__notes__`` (a list made by the first note)."""

    def __init__(self, exception: ExceptionValue):
        self.exception = exception

    def describe(self):
        return f"{self.exception.describe()}.add_note"

    def call(self, tx, args, kwargs):
        from .containers import ListValue

        if len(args) != 1 or kwargs:
            raise GraphBreak(f"{self.describe()} takes one argument (TypeError at run time)")
        note = args[0]
        if not (note.is_constant() and isinstance(note.as_constant(), str)):
            if note.is_constant():
                raise python_error(TypeError, f"note must be a str, not '{type(note.as_constant()).__name__}'")
            raise GraphBreak(f"{self.describe()} of {note.describe()}")
        notes = self.exception.attributes.setdefault("__notes__", ListValue([]))
        if not isinstance(notes, ListValue):
            raise GraphBreak(f"{self.describe()}: its __notes__ is {notes.describe()}")
        notes.items.append(note)
        return ConstantValue(None)


def handled_exception(tx, fn, args, kwargs) -> Value:
    """``sys.exc_info()`` / ``sys.exception()``: the exception a handler of the trace is handling."""
    import sys

    from .containers import TupleValue

    if args or kwargs:
        raise GraphBreak(f"{fn.__name__}() takes no arguments (TypeError at run time)")
    handled = tx.ctx.exc_info
    if handled is CALLERS:
        handled = callers_exception(tx)
    if handled is CALLERS:
        raise GraphBreak(f"sys.{fn.__name__}() outside the captured code's handlers reads the exception its "
                         "caller is handling, unknown at capture time")
    if not isinstance(handled, ExceptionValue):
        return ConstantValue(None) if fn is sys.exception else TupleValue([ConstantValue(None)] * 3)
    if fn is sys.exception:
        return handled
    return TupleValue([ConstantValue(handled.cls), handled, TracebackValue()])


class _TextMethod(Value):
    """``e.__str__`` / ``e.__repr__`` bound to an exception of the trace."""

    def __init__(self, exception: ExceptionValue, conversion: str):
        self.exception = exception
        self.conversion = conversion

    def describe(self):
        return f"{self.exception.describe()}.__{self.conversion}__"

    def call(self, tx, args, kwargs):
        if args or kwargs:
            raise GraphBreak(f"{self.describe()} takes no arguments (TypeError at run time)")
        return self.exception.to_text(tx, self.conversion)


def is_exception_class(value: Value) -> bool:
    return value.is_constant() and isinstance(value.as_constant(), type) \
        and issubclass(value.as_constant(), BaseException)


def make_exception(tx, cls: type, args: list[Value], kwargs: dict, class_source=None) -> ExceptionValue:
    """``cls(*args)`` for an exception class: a value of the trace, its Python ``__init__`` inlined.

    As ``BaseException.__new__``, the new exception's ``args`` are the call's positional arguments
    (an ``__init__`` calling ``super().__init__(...)`` replaces them).
    """
    why = why_not_plain(cls)
    if why is not None:
        raise GraphBreak(f"creating the exception {cls.__qualname__} in captured code: {why}")
    if issubclass(cls, BaseExceptionGroup):
        return make_group(tx, cls, args, kwargs)
    base = next(k for k in cls.__mro__ if k.__module__ == "builtins")
    if base not in _PLAIN_BUILTINS:
        # Its C __init__/__new__ reads its arguments (OSError's errno, UnicodeError's fields, ...).
        raise GraphBreak(f"creating the exception {cls.__qualname__} ({base.__name__}) in captured code is not "
                         "captured")
    exception = ExceptionValue(cls, args, class_source)
    exception.value_known = True
    init = user_init(cls)
    if init is None:
        if kwargs:
            raise GraphBreak(f"{cls.__qualname__}() takes no keyword arguments (TypeError at run time)")
        return exception
    from .functions import UserFunctionValue

    calling, tx.calling = tx.calling, False  # __init__'s result is not the CALL's
    try:
        result = UserFunctionValue(init).call(tx, [exception, *args], kwargs)
    finally:
        tx.calling = calling
    if not (result.is_constant() and result.as_constant() is None):
        raise python_error(TypeError, f"__init__() should return None, not '{result.python_type().__name__}'")
    return exception


class ExceptionGroupValue(ExceptionValue):
    """``ExceptionGroup(message, exceptions)`` / ``BaseExceptionGroup`` made in the trace (``except*``)."""

    def __init__(self, cls: type, message: str, exceptions: list[ExceptionValue], given: Value | None = None):
        from .containers import ListValue

        super().__init__(cls, [ConstantValue(message), given if given is not None else ListValue(list(exceptions))])
        self.message = message
        self.exceptions = list(exceptions)

    def getattr(self, tx, name):
        from .containers import TupleValue

        if name == "exceptions":
            return TupleValue(list(self.exceptions))
        if name == "message":
            return ConstantValue(self.message)
        if name in ("split", "subgroup", "derive"):
            raise GraphBreak(f"`.{name}` of {self.describe()} is not captured")
        return super().getattr(tx, name)

    def text(self, conversion: str) -> str:
        if conversion == "str":
            n = len(self.exceptions)
            return f"{self.message} ({n} sub-exception{'s' if n > 1 else ''})"
        # BaseException's repr of (message, the sequence as given), the sequence's repr of each exception's.
        inner = ", ".join(e.text("repr") for e in self.exceptions)
        if self.args[1].python_type() is tuple:
            inner = f"({inner}{',' if len(self.exceptions) == 1 else ''})"
        else:
            inner = f"[{inner}]"
        return f"{self.cls.__name__}({self.message!r}, {inner})"

    def leaves(self) -> list[ExceptionValue]:
        return [leaf for e in self.exceptions
                for leaf in (e.leaves() if isinstance(e, ExceptionGroupValue) else [e])]

    def derive(self, exceptions: list[ExceptionValue]) -> "ExceptionGroupValue":
        """``self.derive(excs)`` with the metadata ``split`` copies (cause, context, traceback, notes)."""
        derived = group_of(self.message, exceptions)
        # PyException_SetCause, as CPython's exceptiongroup_subset calls it, sets __suppress_context__.
        derived.cause, derived.context, derived.suppress_context = self.cause, self.context, True
        derived.traceback = self.traceback
        if "__notes__" in self.attributes:
            derived.attributes["__notes__"] = self.attributes["__notes__"]
        return derived

    def split(self, matches) -> tuple:
        """``(match, rest)`` of the leaves ``matches`` selects (a group matching as a whole goes whole), each
        None when empty, with the group's nesting kept."""
        if matches(self):
            return self, None
        match, rest = [], []
        for e in self.exceptions:
            if isinstance(e, ExceptionGroupValue):
                m, r = e.split(matches)
                match += [m] if m is not None else []
                rest += [r] if r is not None else []
            else:
                (match if matches(e) else rest).append(e)
        return (self.derive(match) if match else None), (self.derive(rest) if rest else None)


def group_of(message: str, exceptions: list[ExceptionValue], given: Value | None = None) -> ExceptionGroupValue:
    """``BaseExceptionGroup(message, exceptions)``: an ``ExceptionGroup`` when they all are ``Exception``s."""
    cls = ExceptionGroup if all(issubclass(e.cls, Exception) for e in exceptions) else BaseExceptionGroup
    return ExceptionGroupValue(cls, message, exceptions, given)


def make_group(tx, cls: type, args: list[Value], kwargs: dict) -> ExceptionGroupValue:
    """``ExceptionGroup(message, exceptions)`` / ``BaseExceptionGroup(...)`` with CPython's checks."""
    from .containers import SequenceValue

    if cls not in (ExceptionGroup, BaseExceptionGroup):
        raise GraphBreak(f"creating the exception group subclass {cls.__qualname__} in captured code is not "
                         "captured")
    if kwargs or len(args) != 2:
        raise python_error(TypeError, f"BaseExceptionGroup.__new__() takes exactly 2 arguments ({len(args)} given)")
    message, given = args
    if not (message.is_constant() and type(message.as_constant()) is str):
        raise GraphBreak(f"{cls.__name__}() with the message {message.describe()}")
    if not isinstance(given, SequenceValue):
        raise GraphBreak(f"{cls.__name__}() of {given.describe()}")
    exceptions = given.items
    if not exceptions:
        raise python_error(ValueError, "second argument (exceptions) must be a non-empty sequence")
    if not all(isinstance(e, ExceptionValue) for e in exceptions):
        raise GraphBreak(f"{cls.__name__}() of items that are not exceptions made in the captured code")
    if cls is ExceptionGroup and not all(issubclass(e.cls, Exception) for e in exceptions):
        raise python_error(TypeError, "Cannot nest BaseExceptions in an ExceptionGroup")
    return group_of(message.as_constant(), list(exceptions), given)


def _plain_builtins() -> frozenset:
    """Builtin exception classes whose ``__init__`` only stores ``args`` (their text is ``BaseException``'s)."""
    import builtins

    special = (OSError, UnicodeError, SyntaxError, ImportError, StopIteration, SystemExit, BaseExceptionGroup,
               AttributeError, NameError)
    return frozenset(c for c in vars(builtins).values() if isinstance(c, type) and issubclass(c, BaseException)
                     and not issubclass(c, special))


_PLAIN_BUILTINS = _plain_builtins() | {KeyError, StopIteration, AttributeError, NameError}


class PythonError(GraphBreak):
    """Python raises ``exception`` here at run time (an ``ExceptionValue``).

    Unhandled by the traced frames, it is an ordinary graph break (``reason``): the
    instruction runs eagerly and raises for real.
    """

    def __init__(self, exception: ExceptionValue, reason: str | None = None, reraise: bool = False):
        super().__init__(reason or f"the code raises {exception.cls.__qualname__} here, which no handler of the "
                                   "captured code catches; it runs eagerly")
        self.exception = exception
        #: ``RERAISE`` / bare ``raise``: the exception keeps its ``__context__``.
        self.reraise = reraise


class UnknownMessage(Value):
    """The message of an exception Python raises whose text the trace does not know."""

    def describe(self):
        return "an error message not known at capture time"

    def reconstruct(self, cg):
        raise GraphBreak("the message of an exception raised while capturing is not known at capture time")


class AttributeMissing(PythonError):
    """``AttributeError`` here: the generic lookup found nothing, or inlined code raised one.

    Catchable as any ``PythonError``.  Callers that model what eager does with that error
    (``hasattr``, ``getattr`` with a default, a class's ``__getattr__``) catch it when it was
    raised directly (no inlined frame in ``frames``, see ``values.objects.escaped``).
    ``message``: ``str()`` of the error (unknown when None).
    """

    def __init__(self, reason: str, exception: ExceptionValue | None = None, reraise: bool = False,
                 message: str | None = None):
        if exception is None:
            exception = ExceptionValue(AttributeError, [ConstantValue(message) if message is not None
                                                        else UnknownMessage()])
        super().__init__(exception, reason, reraise)


def missing_attribute_message(obj, name: str) -> str:
    """CPython's message for ``obj.<name>`` missing (read without running the object's own code)."""
    if isinstance(obj, type):
        return f"type object '{type.__dict__['__name__'].__get__(obj)}' has no attribute '{name}'"
    if type(obj) is types.ModuleType and type(obj.__dict__.get("__name__")) is str:
        return f"module '{obj.__dict__['__name__']}' has no attribute '{name}'"
    return f"'{tp_name(type(obj)):.100}' object has no attribute '{name}'"


def tp_name(cls: type) -> str:
    """The class's C ``tp_name`` (what CPython's messages print): a static type's names its module."""
    heap = cls.__flags__ & (1 << 9)  # Py_TPFLAGS_HEAPTYPE
    module = type.__dict__["__module__"].__get__(cls)
    name = type.__dict__["__name__"].__get__(cls)
    return name if heap or module == "builtins" else f"{module}.{name}"


def raising(exception: ExceptionValue, reason: str | None = None, reraise: bool = False) -> PythonError:
    """The error that raising ``exception`` is in the trace (an ``AttributeError`` is an ``AttributeMissing``,
    so the lookups that model it see what user code raised)."""
    if issubclass(exception.cls, AttributeError):
        return AttributeMissing(reason or f"the code raises {exception.cls.__qualname__} here, which no handler "
                                          "of the captured code catches; it runs eagerly", exception, reraise)
    return PythonError(exception, reason, reraise)


def python_error(cls: type, *args, reason: str | None = None) -> PythonError:
    """``cls(*args)`` (constant arguments) raised by Python at this point of the trace."""
    return raising(ExceptionValue(cls, [ConstantValue(a) for a in args]), reason)


def from_real(e: BaseException, reason: str | None = None) -> GraphBreak:
    """What a builtin raised for real on constants, as eager raises it (a plain break if it cannot be)."""
    cls = type(e)
    simple = all(type(a) in (int, float, str, bool, type(None), bytes) for a in e.args)
    if cls in _PLAIN_BUILTINS and simple and e.__cause__ is None and not getattr(e, "__notes__", None) \
            and cls not in (AttributeError, NameError):
        return python_error(cls, *e.args, reason=reason)
    return GraphBreak(reason or f"the code raises {cls.__name__}: {e}")
