"""Every CPython 3.11 opcode is handled by the interpreter or breaks with a documented reason (issue 8 item 1).

The table test enumerates ``dis.opmap``.  Opcodes in the break-reason table
(``interpreter/ops_unsupported.py``) are checked to break cleanly with their
user-readable reason, and, where a program can reach them, with eager's
result.  Opcodes handled since issue 8 (``match`` statements, ``GET_LEN``,
``DELETE_DEREF``/``DELETE_ATTR``/``DELETE_GLOBAL``; sets are in ``test_sets.py``) are tested differentially
(results, mutated inputs and globals, printed text) under the ``eager`` and
``aot_eager`` backends, then under ``fullgraph=True`` as one graph.
"""
import builtins
import dis
import sys
from dataclasses import dataclass

import pytest
import torch

import dynacap
from differential import CountingBackend, assert_fully_captured, explain_captured, run_differential
from dynacap.errors import GraphBreak
from dynacap.interpreter import TraceContext, Tracer
from dynacap.interpreter.ops_unsupported import BREAK_REASONS, refuse
from dynacap.interpreter.tracer import HANDLERS

BACKENDS = ["eager", "aot_eager"]


def _refused(name: str) -> bool:
    return HANDLERS.get(name) is refuse


# -- the table ----------------------------------------------------------------------------------
def test_every_opcode_is_handled_or_has_a_documented_break_reason():
    missing = sorted(name for name in dis.opmap if name not in HANDLERS)
    assert not missing, f"opcodes with neither a handler nor a break reason: {missing}"
    undocumented = sorted(name for name in dis.opmap if _refused(name) and name not in BREAK_REASONS)
    assert not undocumented, undocumented
    stale = sorted(name for name in BREAK_REASONS if not _refused(name))
    assert not stale, f"handled now, remove from ops_unsupported.BREAK_REASONS: {stale}"
    assert set(BREAK_REASONS) <= set(dis.opmap)


@pytest.mark.parametrize("opname", sorted(BREAK_REASONS))
def test_a_refused_opcode_breaks_with_its_readable_reason(opname):
    def f():
        pass

    tx = Tracer(f.__code__, TraceContext(f_globals=f.__globals__, f_builtins=vars(builtins)), f.__globals__)
    ins = dis.Instruction(opname, dis.opmap[opname], 0, 0, "", 0, None, False)
    with pytest.raises(GraphBreak) as info:
        HANDLERS[opname](tx, ins)
    reason = info.value.reason
    assert reason == BREAK_REASONS[opname]
    assert "___" not in reason and "L[" not in reason and "G[" not in reason


# -- refused opcodes a program reaches: eager's result ---------------------------------------------
def define_class(x):
    class Local:
        scale = 2.0
    return x * Local.scale


def handle_error(x):
    y = x + 1
    try:
        raise ValueError("no")
    except ValueError as e:
        return y * len(str(e))


def exec_code(x):
    scope = {}
    exec("z = 5", scope)
    return x + scope["z"]


async def coroutine(x):
    return x + 1


def await_coroutine(x):
    c = coroutine(x)
    try:
        c.send(None)
    except StopIteration as stop:
        return stop.value * 2


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_class_statement_has_eager_result(backend):
    """Captured (``ops_classes``) or, where ``LOAD_BUILD_CLASS`` is refused, a break with its reason."""
    run_differential(define_class, torch.randn(3), backend=CountingBackend(backend))
    out = explain_captured(define_class, torch.randn(3))
    if "LOAD_BUILD_CLASS" in BREAK_REASONS:
        assert any(BREAK_REASONS["LOAD_BUILD_CLASS"] == r.reason for r in out.break_reasons)


@pytest.mark.parametrize("fn", [handle_error, exec_code, await_coroutine])
def test_exception_handlers_exec_and_coroutines_break_with_eager_result(fn):
    run_differential(fn, torch.randn(3))


class _Swallow:
    def __enter__(self):
        return self

    def __exit__(self, kind, value, tb):
        return kind is KeyError


def exception_table_opcodes(x):
    """PUSH_EXC_INFO, CHECK_EXC_MATCH, POP_EXCEPT, RERAISE, RAISE_VARARGS, WITH_EXCEPT_START (LOAD_ASSERTION_ERROR:
    ``test_exceptions.failing_assert``, in a module pytest does not rewrite)."""
    try:
        try:
            raise IndexError(x.dim())
        except ValueError:
            x = x * 0
    except LookupError:
        x = x + 1
    with _Swallow():
        raise KeyError("swallowed")
    return x


@pytest.mark.parametrize("backend", BACKENDS)
def test_the_exception_table_opcodes_are_captured(backend):
    diff = run_differential(exception_table_opcodes, torch.randn(3), backend=CountingBackend(backend))
    assert diff.compiles_first == 1
    assert_fully_captured(exception_table_opcodes, torch.randn(3))


# -- DELETE_ATTR / DELETE_GLOBAL: replayed like STORE_ATTR / STORE_GLOBAL ---------------------------
class Holder:
    b = "class b"

    def __init__(self):
        self.a = 1.0
        self.b = 2.0


class WithProperty:
    def __init__(self):
        self._v = 1.0

    @property
    def v(self):
        return self._v

    @v.deleter
    def v(self):
        print("deleter")
        del self._v


def delete_attributes(x, h):
    y = x + h.a
    del h.a
    h.c = 5.0
    del h.c
    return y * 2, hasattr(h, "a"), h.b, getattr(h, "c", "no c")


def delete_shadowing_attribute(x, h):
    y = x + 1
    del h.b  # the class attribute shows through: a break, after which eager reads it
    return y, h.b


def delete_missing_attribute(x, h):
    y = x + 1
    del h.a
    del h.a  # AttributeError
    return y


def delete_through_a_property(x, p):
    y = x + 1
    del p.v
    return y, hasattr(p, "_v")


@pytest.mark.parametrize("backend", BACKENDS)
def test_del_attribute_is_replayed_in_one_graph(backend):
    x = torch.randn(3)

    def fresh():
        return (x.clone(), Holder()), {}

    d = run_differential(delete_attributes, x, Holder(), fresh_inputs=fresh, backend=CountingBackend(backend))
    assert d.graph_count == 1
    for outcome in d.captured:
        h = outcome.inputs[0][1]
        assert "a" not in vars(h) and "c" not in vars(h) and vars(h)["b"] == 2.0
    out = dynacap.explain(delete_attributes)(x, Holder())
    assert out.graph_break_count == 0 and out.graph_count == 1, out
    dynacap.reset()
    dynacap.optimize(delete_attributes, backend=backend, fullgraph=True)(x, Holder())


def test_del_attribute_guards_that_it_is_there():
    compiled = dynacap.optimize(delete_attributes, backend="eager")
    compiled(torch.randn(3), Holder())
    h = Holder()
    del h.a
    with pytest.raises(AttributeError):
        compiled(torch.randn(3), h)


@pytest.mark.parametrize("fn,make", [(delete_missing_attribute, Holder), (delete_through_a_property, WithProperty),
                                     (delete_shadowing_attribute, Holder)])
def test_del_attribute_that_cannot_be_replayed_breaks_with_eager_behaviour(fn, make):
    x = torch.randn(3)
    run_differential(fn, x, make(), fresh_inputs=lambda: ((x.clone(), make()), {}))


DELETED_GLOBAL = 3.0


def delete_global(x):
    global DELETED_GLOBAL, len
    y = x * DELETED_GLOBAL
    del DELETED_GLOBAL
    len = lambda v: 0  # noqa: E731 (a global shadowing a builtin)
    del len
    return y + 1, len([1, 2])


@pytest.mark.parametrize("backend", BACKENDS)
def test_del_global_is_replayed_in_one_graph(backend):
    global DELETED_GLOBAL
    try:
        x = torch.randn(3)
        expected = delete_global(x)
        assert "DELETED_GLOBAL" not in globals()
        DELETED_GLOBAL = 3.0
        counting = CountingBackend(backend)
        compiled = dynacap.optimize(delete_global, backend=counting)
        for _ in range(2):
            got = compiled(x)
            assert torch.equal(expected[0], got[0]) and got[1:] == expected[1:]
            assert "DELETED_GLOBAL" not in globals() and "len" not in globals()
            DELETED_GLOBAL = 3.0
        assert counting.compiles == 1
        del DELETED_GLOBAL
        with pytest.raises(NameError):  # a missing global: eager's NameError, not a stale capture
            compiled(x)
        DELETED_GLOBAL = 3.0
        out = dynacap.explain(delete_global)(x)
        assert out.graph_break_count == 0 and out.graph_count == 1, out
    finally:
        DELETED_GLOBAL = 3.0


OTHER_MODULE = {"__name__": "other_module"}
exec("def drop():\n    global COUNTER\n    del COUNTER\n", OTHER_MODULE)


def delete_another_modules_global(x):
    OTHER_MODULE["drop"]()
    return x + 1


def test_del_of_another_modules_global_in_an_inlined_call():
    counting = CountingBackend()
    compiled = dynacap.optimize(delete_another_modules_global, backend=counting)
    for _ in range(2):
        OTHER_MODULE["COUNTER"] = 1
        compiled(torch.randn(3))
        assert "COUNTER" not in OTHER_MODULE
    assert counting.compiles == 1
    with pytest.raises(NameError):
        compiled(torch.randn(3))


# -- match statements (MATCH_* and GET_LEN) ---------------------------------------------------------
@dataclass
class Point:
    x: object
    y: object


class Plain:
    """No ``__match_args__``: only keyword sub-patterns."""

    def __init__(self, k):
        self.k = k


def match_subject(s, t):
    match s:
        case {"a": 1, "b": b, **rest}:
            return t + b, rest
        case {"w": w}:
            return t * w
        case [1, *middle, 2]:
            return t * len(middle)
        case [a, b]:
            return t + a + b
        case Point(0, y):
            return t - y
        case Point(x=x, y=3):
            return t * x
        case Plain(k=k):
            return t + k
        case int(v) if v > 10:
            return t * v
        case str() | bytes():
            return t - 1
        case (1, 2, 3):
            return t + 123
        case torch.Tensor():
            return t + s
    return t + 0


SUBJECTS = [
    {"a": 1, "b": 2.0, "c": 3},
    {"a": 2, "w": 4},
    {"w": 5, "a": 1},
    [1, 7, 8, 2],
    [3.0, 4.0],
    (5, 6),
    Point(0, 1.5),
    Point(2.0, 3),
    Point(1, 1),
    Plain(7),
    42,
    3,
    "text",
    b"bytes",
    (1, 2, 3),
    range(2),
    None,
]


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("subject", SUBJECTS, ids=repr)
def test_match_statement_matches_eager_in_one_graph(subject, backend):
    t = torch.randn(3)
    d = run_differential(match_subject, subject, t, backend=CountingBackend(backend))
    assert d.graph_count == 1
    assert_fully_captured(match_subject, subject, t)
    compiled = dynacap.optimize(match_subject, backend=backend, fullgraph=True)
    expected = match_subject(subject, t)
    got = compiled(subject, t)
    assert type(got) is type(expected)


def test_match_on_a_tensor_subject_and_a_guard_on_it():
    def f(t):
        match t:
            case torch.Tensor() if t.shape[0] == 3:
                return t + 1
            case _:
                return t - 1

    for t in (torch.randn(3), torch.randn(4)):
        d = run_differential(f, t)
        assert d.graph_count == 1


def test_match_binds_into_globals_and_mutates_an_input_list():
    def f(s, out, t):
        global MATCHED
        match s:
            case [x, y]:
                MATCHED = (x, y)
                out.append(x)
                return t * y
        return t

    try:
        d = run_differential(f, [2, 3.0], [], torch.randn(3))
        assert d.graph_count == 1
        assert MATCHED == (2, 3.0)
    finally:
        globals().pop("MATCHED", None)


def test_match_on_torch_return_types():
    def f(t):
        match torch.max(t, dim=0):
            case torch.return_types.max(values, indices):
                return values + indices
        return t

    run_differential(f, torch.randn(3, 2))
    assert_fully_captured(f, torch.randn(3, 2))


class TooManyPositional:
    __match_args__ = ("a",)

    def __init__(self):
        self.a = 1


def bad_pattern(s, t):
    match s:
        case TooManyPositional(a, b):
            return t + a + b
    return t


class Keys:
    A = "k"
    B = "k"


def duplicate_keys(s, t):
    match s:
        case {Keys.A: a, Keys.B: b}:  # the same key twice: ValueError at run time
            return t + a + b
    return t


@pytest.mark.parametrize("fn,subject", [(bad_pattern, TooManyPositional()), (duplicate_keys, {"k": 1, "z": 2})])
def test_a_match_that_raises_breaks_with_eager_exception(fn, subject):
    d = run_differential(fn, subject, torch.randn(3))
    assert isinstance(d.eager.exception, (TypeError, ValueError))


def test_get_len_is_len():
    def f(s, t):
        match s:
            case [_, _, *_]:
                return t * len(s)
        return t - 1

    for s in ([1, 2], [1], (1, 2, 3)):
        run_differential(f, s, torch.randn(3))
        assert_fully_captured(f, s, torch.randn(3))


# -- DELETE_DEREF -------------------------------------------------------------------------------------
def delete_cell(t):
    y = t + 1

    def read():
        return y * 2

    r = read()
    del y
    return r + 1


def delete_cell_then_read(t):
    y = t + 1

    def read():
        return y * 2

    del y
    return read()


@pytest.mark.parametrize("backend", BACKENDS)
def test_del_of_a_cell_variable_in_one_graph(backend):
    d = run_differential(delete_cell, torch.randn(3), backend=CountingBackend(backend))
    assert d.graph_count == 1
    assert_fully_captured(delete_cell, torch.randn(3))
    dynacap.optimize(delete_cell, backend=backend, fullgraph=True)(torch.randn(3))


def test_reading_a_deleted_cell_raises_name_error_as_eager():
    d = run_differential(delete_cell_then_read, torch.randn(3))
    assert isinstance(d.eager.exception, NameError)


def test_the_hook_never_sees_module_level_names():
    """LOAD_NAME/STORE_NAME only run in module/class bodies and exec'd code: never captured frames."""
    assert sys.version_info[:2] == (3, 11)
    code = compile("a = 1\nb = a + 1", "<m>", "exec")
    assert {i.opname for i in dis.get_instructions(code)} >= {"STORE_NAME", "LOAD_NAME"}
    assert not code.co_flags & 0x1  # not CO_OPTIMIZED: the hook skips it
