"""``class`` statements in captured code: ``LOAD_BUILD_CLASS``, and the name opcodes of the class body.

``__build_class__(body, name, *bases, **kwargs)`` is traced as CPython runs
it: the body function is inlined with an empty namespace (its ``LOAD_NAME``/
``STORE_NAME``/``DELETE_NAME``/``LOAD_CLASSDEREF``/``SETUP_ANNOTATIONS`` read
and write it), then ``values.classes.make_class`` makes the class from it.
Only class bodies entered here use the namespace; the name opcodes anywhere
else (a module body or exec'd code, which the hook never captures) break.  A
break inside the body is never resumed inside it (a class body is no function
frame): the ``class`` statement breaks as a whole.
"""
from __future__ import annotations

import builtins

from ..errors import GraphBreak
from ..values.base import Value
from ..values.classes import make_class
from ..values.containers import DictValue
from ..values.functions import UserFunctionValue
from .ops_variables import CellRefValue, _load_deref
from .tracer import handles

_CO_OPTIMIZED = 0x1
_OUTSIDE_CLASS_BODY = ("a name of a module body or exec'd code ({what}) is not captured: dynacap captures "
                       "function frames only")


class _ClassBody:
    """A class body being traced: its code and the tracer running it (whose ``locals`` is the namespace)."""

    def __init__(self, code, caller):
        self.code = code
        self.caller = caller
        self.tracer = None


#: id(TraceContext) -> the class bodies being traced in it, innermost last.
_BODIES: dict[int, list[_ClassBody]] = {}


class BuildClassValue(Value):
    """``__build_class__`` (what ``LOAD_BUILD_CLASS`` pushes)."""

    def describe(self):
        return "__build_class__"

    def reconstruct(self, cg) -> None:
        cg.load_const(builtins.__build_class__)

    def call(self, tx, args, kwargs):
        if len(args) < 2 or not isinstance(args[0], UserFunctionValue) or not args[1].is_constant():
            raise GraphBreak("__build_class__ with these arguments")
        body, name, bases = args[0], args[1].as_constant(), args[2:]
        kwargs = dict(kwargs)
        metaclass = kwargs.pop("metaclass", None)
        if metaclass is not None and not (metaclass.is_constant() and metaclass.as_constant() is type):
            raise GraphBreak(f"class {name} with a metaclass ({metaclass.describe()}) is not captured: it runs "
                             "eagerly")
        namespace = run_body(tx, body, name)
        classcell = namespace.pop("__classcell__", None)
        if classcell is not None and not isinstance(classcell, CellRefValue):
            raise GraphBreak(f"class {name}: __classcell__ is {classcell.describe()}")
        return make_class(tx, name, list(bases), namespace, kwargs,
                          classcell.box if classcell is not None else None)


def run_body(tx, body: UserFunctionValue, name: str) -> dict[str, Value]:
    """The namespace the class body fills (its locals, in the order it stored them)."""
    record = _ClassBody(body.fn.__code__, tx)
    stack = _BODIES.setdefault(id(tx.ctx), [])
    stack.append(record)
    calling, tx.calling = tx.calling, False  # the body's result is not the class statement's
    try:
        body.call(tx, [], {})
    except GraphBreak as e:
        raise GraphBreak(f"inside the body of class {name}: {e.reason}") from None
    finally:
        tx.calling = calling
        stack.pop()
        if not stack:
            del _BODIES[id(tx.ctx)]
    if record.tracer is None:
        raise GraphBreak(f"the body of class {name} stored no name")
    return dict(record.tracer.locals)


def _body_namespace(tx) -> dict[str, Value] | None:
    """The namespace of the class body ``tx`` runs, None if ``tx`` runs no class body entered here."""
    if not tx.code.co_flags & _CO_OPTIMIZED:
        for record in reversed(_BODIES.get(id(tx.ctx), ())):
            if record.code is tx.code and tx.parent is record.caller:
                record.tracer = tx
                return tx.locals
    return None


def _namespace(tx, ins) -> dict[str, Value]:
    """The class body's namespace; anywhere else a break."""
    namespace = _body_namespace(tx)
    if namespace is None:
        raise GraphBreak(_OUTSIDE_CLASS_BODY.format(what=ins.opname))
    return namespace


@handles("LOAD_BUILD_CLASS")
def _load_build_class(tx, ins):
    tx.push(BuildClassValue())


@handles("LOAD_NAME")
def _load_name(tx, ins):
    namespace = _namespace(tx, ins)
    value = namespace.get(ins.argval)
    tx.push(value if value is not None else tx.load_global(ins.argval))


@handles("STORE_NAME")
def _store_name(tx, ins):
    _namespace(tx, ins)[ins.argval] = tx.pop()


@handles("DELETE_NAME")
def _delete_name(tx, ins):
    namespace = _namespace(tx, ins)
    if ins.argval not in namespace:
        raise GraphBreak(f"`del {ins.argval}` in a class body: the name is not defined (NameError at run time)")
    del namespace[ins.argval]


@handles("SETUP_ANNOTATIONS")
def _setup_annotations(tx, ins):
    namespace = _namespace(tx, ins)
    if "__annotations__" not in namespace:
        namespace["__annotations__"] = DictValue({})


@handles("LOAD_CLASSDEREF")
def _load_classderef(tx, ins):
    """A free variable read in a class body: the namespace first, then the cell."""
    namespace = _body_namespace(tx)
    if namespace is not None and ins.argval in namespace:
        tx.push(namespace[ins.argval])
        return
    _load_deref(tx, ins)
