"""Break reasons the program fuzzer's programs hit (issue 8), removed mechanism by mechanism: each test is
differential (eager vs captured) and counts graphs; the cases that must still break or fall back are here too."""
from __future__ import annotations

import collections
import copy
import io

import pytest
import torch

from differential import CountingBackend, explain_captured, run_differential


class Out(dict):
    """The fuzzer's ``ModelOutput``-like dict subclass: attributes read from the items."""

    def __getattr__(self, name):
        try:
            return self[name]
        except KeyError:
            raise AttributeError(name) from None


class LoggedOut(collections.OrderedDict):
    """``OrderedDict.setdefault``/``update`` of a subclass store through its ``__setitem__``."""

    def __setitem__(self, key, value):
        LOG.append(key)
        super().__setitem__(key, value)


LOG: list = []
G_SEEN = 0


def _breaks(fn, *args):
    out = explain_captured(fn, *args)
    return out.graph_count, [str(b.reason) for b in out.break_reasons]


def _reasons(fn, *args):
    """The break reasons of one call (results of objects made per call are compared by the test itself)."""
    import dynacap

    return [str(b.reason) for b in dynacap.explain(fn)(*args).break_reasons]


@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
def test_dict_subclass_missing_key_is_catchable(backend):
    """``self[name]`` of a missing key inside ``__getattr__``'s ``try``: the KeyError is caught as in eager."""
    def fn(x):
        out = Out(a=x, n=2)
        out["b"] = x + 1
        n = len(out) + hasattr(out, "zz") + hasattr(out, "b") + ("c" in out)
        try:
            del out["zz"]
        except KeyError as e:
            n += len(e.args)
        return out.a * n, out

    diff = run_differential(fn, torch.randn(3), backend=CountingBackend(backend))
    assert diff.graph_count == 1
    assert _breaks(fn, torch.randn(3)) == (1, [])


def test_frame_dict_subclass_missing_attribute():
    """A dict subclass from the frame: the missing key's KeyError is caught in ``__getattr__``; a global written."""
    def fn(x, o):
        global G_SEEN
        G_SEEN = hasattr(o, "zz") + hasattr(o, "a")
        return x * G_SEEN + o.a

    diff = run_differential(fn, torch.randn(3), Out(a=2), fresh_inputs=lambda: ((torch.ones(3), Out(a=2)), {}))
    assert diff.graph_count == 1
    assert G_SEEN == 1
    assert _breaks(fn, torch.randn(3), Out(a=2)) == (1, [])


def test_dict_subclass_writing_methods():
    """``setdefault``/``update``/``pop``/``popitem``/``clear`` of ``dict`` on a subclass object made in the trace."""
    def fn(x):
        out = Out(a=x)
        t = out.setdefault("b", x * 2) + out.setdefault("a", x)
        out.update(c=x + 3)
        out.update({"d": 4})
        t = t + out.pop("c") + out.pop("zz", 1)
        k, v = out.popitem()
        keep = Out(out)
        out.clear()
        return t * v, k, out, keep, type(keep).__name__

    diff = run_differential(fn, torch.randn(3))
    assert diff.graph_count == 1
    assert _breaks(fn, torch.randn(3)) == (1, [])


def test_dict_subclass_pop_missing_raises():
    """``pop`` of a missing key with no default: eager's KeyError, from the captured run too."""
    def fn(x):
        out = Out(a=x)
        return out.pop("zz") + x

    run_differential(fn, torch.randn(3))


def test_ordered_dict_subclass_setdefault_runs_its_setitem():
    """``OrderedDict.setdefault`` of a subclass calls the subclass's ``__setitem__``: eager's log, in order."""
    def fn(x):
        out = LoggedOut()
        out["a"] = x
        t = out.setdefault("b", x + 1)
        out.update(c=2)
        return t + out["a"], list(out)

    LOG.clear()
    run_differential(fn, torch.randn(3))
    assert LOG == ["a", "b", "c"] * 3


def _buffers_differential(fn, *args, closed=False, backend=None):
    """``run_differential`` with a new ``io.StringIO`` as the last argument of each run; every run's text
    must be eager's."""
    buffers = []

    def fresh():
        buf = io.StringIO()
        if closed:
            buf.close()
        buffers.append(buf)
        return (*(a.clone() for a in args), buf), {}

    diff = run_differential(fn, *args, io.StringIO(), fresh_inputs=fresh,
                            backend=CountingBackend(backend) if backend else None)
    if not closed:
        texts = [b.getvalue() for b in buffers]
        assert texts == [texts[0]] * 3, texts
    return diff, buffers[0].getvalue() if not closed else None


def _write_line(buf, n):
    return buf.write(f"n={n}\n")


@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
def test_string_io_write_is_replayed(backend):
    """``buf.write`` of a text known now (here and in an inlined helper): one graph, eager's text and count."""
    def fn(x, buf):
        n = buf.write(str(x.dim()) + "\n")
        y = torch.relu(x) * n
        n = n + _write_line(buf, len(x))
        return y + n

    diff, text = _buffers_differential(fn, torch.randn(4), backend=backend)
    assert diff.graph_count == 1
    assert text == "1\nn=4\n"
    assert _breaks(fn, torch.randn(4), io.StringIO()) == (1, [])


def test_string_io_write_order_with_breaks():
    """Writes replayed before a break's eager instruction: a print to the buffer (a break) and ``getvalue``
    (it reads the buffer: a break) see the writes before them, in program order."""
    def fn(x, buf):
        buf.write("a")
        print("p", file=buf)
        buf.write("b")
        seen = buf.getvalue()
        buf.write(seen.upper())
        return x * len(seen)

    diff, text = _buffers_differential(fn, torch.randn(3))
    assert text == "ap\nbAP\nB"
    import dynacap

    reasons = [str(b.reason) for b in dynacap.explain(fn)(torch.randn(3), io.StringIO()).break_reasons]
    assert "print" in reasons[0] and all("getvalue" in r for r in reasons[1:]) and len(reasons) > 1, reasons


def test_string_io_write_of_a_tensor_text_breaks():
    """The text of a tensor needs its values: the write stays a break, and the buffer gets eager's text."""
    def fn(x, buf):
        buf.write(str(x.sum() > 100))
        return x + 1

    diff, text = _buffers_differential(fn, torch.ones(3))
    assert text == "tensor(False)"
    graphs, reasons = _breaks(fn, torch.ones(3), io.StringIO())
    assert reasons


def test_string_io_write_on_closed_buffer():
    """A closed buffer: eager's ValueError, caught in the captured code; uncaught, raised as eager's."""
    def caught(x, buf):
        try:
            buf.write("a")
        except ValueError as e:
            return x * len(str(e))
        return x

    def uncaught(x, buf):
        buf.write("a")
        return x + 1

    diff, _ = _buffers_differential(caught, torch.ones(3), closed=True)
    assert diff.graph_count == 1
    _buffers_differential(uncaught, torch.ones(3), closed=True)


def test_string_io_write_guards_closed():
    """The same code on an open and then a closed buffer: the closed one does not reuse the open one's entry."""
    import dynacap

    def fn(x, buf):
        buf.write("a")
        return x + 1

    compiled = dynacap.optimize(fn, backend=CountingBackend())
    buf = io.StringIO()
    compiled(torch.ones(2), buf)
    assert buf.getvalue() == "a"
    buf.close()
    with pytest.raises(ValueError, match="closed file"):
        compiled(torch.ones(2), buf)


def _deepcopy_and_bump(x, d):
    c = copy.deepcopy(d)
    c["a"].add_(1)
    return c["a"] * 2 + x, c["a"].stride(), c["a"].is_contiguous(), c["a"] is d["a"]


@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
def test_deepcopy_transposed_tensor_symbolic(backend):
    """``copy.deepcopy`` of a transposed (dense) tensor under symbolic sizes: a clone keeping its strides, in
    the graph; the input is left as it was."""
    import dynacap

    dynacap.reset()
    counting = CountingBackend(backend)
    compiled = dynacap.optimize(_deepcopy_and_bump, backend=counting, dynamic=True)
    for n in (3, 5, 7):
        a = torch.randn(n, 4).t()
        x = torch.randn(n, 4).t()
        before = a.clone()
        expected = _deepcopy_and_bump(x, {"a": a.clone().t().contiguous().t()})
        got = compiled(x, d := {"a": a})
        torch.testing.assert_close(got[0], expected[0])
        assert got[1:] == expected[1:]
        torch.testing.assert_close(d["a"], before)
    assert counting.compiles == 1
    assert _breaks(_deepcopy_and_bump, torch.randn(4, 3).t(), {"a": torch.randn(4, 3).t()}) == (1, [])


def test_deepcopy_strided_tensor_keeps_the_real_method():
    """A tensor that is not dense (every other column): the real ``__deepcopy__`` (its storage and strides)."""
    def fn(x, d):
        c = copy.deepcopy(d)
        return c["a"] + x, c["a"].stride(), c["a"].untyped_storage().nbytes()

    run_differential(fn, torch.randn(4, 3), {"a": torch.randn(4, 6)[:, ::2]})


G_FUNCS: list = []


def _local_classes(x, d):
    class Loc:
        unit = 1

        def __init__(self, t, n=1):
            self.t = t
            self.n = n

        def seen(self):
            return self.t + x

        def __add__(self, other):
            return Loc(self.t + other, self.n)

    class Sub(Loc):
        unit = 3

        def step(self, v):
            self.tag = type(self).__name__
            return super().seen() * v

    lo = Sub(x * 2, 2)
    t = (lo + x).t * lo.step(2)
    d["o"] = lo
    G_FUNCS.append(Sub)
    return t


@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
def test_local_classes_with_closures_leave_the_graph(backend):
    """Classes made in the frame whose methods close over its argument and the class itself (``super()``, its
    name): one graph; the escaped object (in the input dict) and class (in a global) are eager's."""
    import dynacap

    dynacap.reset()
    counting = CountingBackend(backend)
    compiled = dynacap.optimize(_local_classes, backend=counting)
    for _ in range(2):
        G_FUNCS.clear()
        x = torch.randn(3)
        e_d, c_d = {}, {}
        expected = _local_classes(x, e_d)
        e_cls = G_FUNCS.pop()
        got = compiled(x, c_d)
        c_cls = G_FUNCS.pop()
        torch.testing.assert_close(got, expected)
        o = c_d["o"]
        assert type(o) is c_cls and c_cls is not e_cls and [k.__name__ for k in c_cls.__mro__] == ["Sub", "Loc", "object"]
        assert vars(o).keys() == vars(e_d["o"]).keys() and o.tag == "Sub"
        torch.testing.assert_close(o.seen(), e_d["o"].seen())
        torch.testing.assert_close(o.step(1.5), e_d["o"].step(1.5))
        added = o + 1
        assert type(added).__name__ == "Loc" and isinstance(o, type(added))
    assert counting.compiles == 1
    assert _reasons(_local_classes, torch.randn(3), {}) == []


def _closures(x):
    def counter():
        c = 0

        def inc():
            nonlocal c
            c += 1
            return c

        def peek():
            return c

        return inc, peek

    def fact(n):
        return 1 if n <= 1 else n * fact(n - 1)

    inc, peek = counter()
    inc()
    return x * fact(3) * inc(), inc, peek, fact


def test_closures_made_in_the_trace_leave_it():
    """Closures of frames that returned in the trace: two sharing a cell (its count goes on after the call), a
    recursive one; one graph, eager's behaviour afterwards."""
    import dynacap

    expected = _closures(torch.ones(2))
    counting = CountingBackend()
    compiled = dynacap.optimize(_closures, backend=counting)
    got = compiled(torch.ones(2))
    torch.testing.assert_close(got[0], expected[0])
    assert (got[1](), got[2](), got[3](4)) == (expected[1](), expected[2](), expected[3](4)) == (3, 3, 24)
    again = compiled(torch.ones(2))
    assert again[1] is not got[1] and again[2]() == 2  # new cells each call
    assert counting.compiles == 1
    assert _reasons(_closures, torch.ones(2)) == []


def test_closure_over_a_frame_that_goes_on_after_a_break():
    """A closure over the frame's own variable, escaping before a break: the resumed frame changes the variable
    later, which eager's closure sees; it is not rebuilt with a cell of its own (the frame runs as eager)."""
    def fn(x):
        n = 1

        def get():
            return n

        G_FUNCS.append(get)
        print("between")
        n = 5
        return x * get()

    G_FUNCS.clear()
    run_differential(fn, torch.ones(2))
    assert [f() for f in G_FUNCS] == [5, 5, 5]


def _make_twice():
    def g(t):
        return t + 1

    def f(t):
        return g(t) * 2

    return f


def test_closure_rebuilt_at_a_break_is_guarded_by_its_parts():
    """A closure of a helper that returned, live across a break: rebuilt, passed to the resume, which guards it
    and the function in its cell by their code (both are new on each call): the second call hits the cache."""
    def fn(x):
        f = _make_twice()
        print("between")
        return f(x)

    diff = run_differential(fn, torch.ones(2))
    assert diff.graph_count == 1


def _local_dataclass(x, log, frozen):
    import dataclasses

    @dataclasses.dataclass(frozen=frozen)
    class LocD:
        t: torch.Tensor
        n: int = 1

        def total(self):
            return self.t * self.n

    lo = LocD(x + 1, 2)
    lo = dataclasses.replace(lo, n=lo.n + 1)
    n = len(dataclasses.fields(lo)) + (lo == LocD(lo.t, lo.n)) + len(dataclasses.asdict(lo))
    log.append(lo)
    return lo.total() + n


@pytest.mark.parametrize("frozen", [False, True])
def test_local_dataclass_leaves_the_graph(frozen):
    """A dataclass made in the frame whose object escapes (into an input list): made again at run time and
    completed by the decorator there, as eager's; one graph."""
    import dataclasses

    import dynacap

    dynacap.reset()
    counting = CountingBackend()
    compiled = dynacap.optimize(_local_dataclass, backend=counting)
    for _ in range(2):
        x = torch.randn(3)
        e_log, c_log = [], []
        expected = _local_dataclass(x, e_log, frozen)
        got = compiled(x, c_log, frozen)
        torch.testing.assert_close(got, expected)
        e, c = e_log[0], c_log[0]
        assert type(c) is not type(e) and repr(type(c)) == repr(type(e))
        assert [f.name for f in dataclasses.fields(c)] == ["t", "n"] and c.n == e.n == 3
        torch.testing.assert_close(c.total(), e.total())
        assert c == type(c)(c.t, 3) and dataclasses.replace(c, n=5).n == 5
        assert type(c).__dataclass_params__.frozen is frozen
        if frozen:
            with pytest.raises(dataclasses.FrozenInstanceError):
                c.n = 1
    assert counting.compiles == 1
    assert _reasons(_local_dataclass, torch.randn(3), [], frozen) == []


def test_local_dataclass_changed_after_decoration_breaks():
    """A field default changed on the class after ``@dataclass``: re-decorating would read the new default,
    so the escaping class is not made again (a break), and the object is eager's."""
    import dataclasses

    def fn(x, log):
        @dataclasses.dataclass
        class LocD:
            t: torch.Tensor
            n: int = 1

        LocD.n = 7
        log.append(LocD(x))
        return x + 1

    log = []
    dynacap_result = __import__("dynacap").optimize(fn, backend=CountingBackend())(torch.ones(2), log)
    torch.testing.assert_close(dynacap_result, torch.ones(2) + 1)
    made = log[0]
    assert made.n == 1 and type(made).n == 7  # eager's __init__ default stays 1
    assert any("after its decorator completed it" in r for r in _reasons(fn, torch.ones(2), []))


class FuzzError(Exception):
    def __init__(self, kind, code):
        super().__init__(kind)
        self.code = code


@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
def test_missing_attribute_of_an_exception_is_catchable(backend):
    """``getattr(e, "code", -1)`` on an exception without it (a ValueError) is the default; one that sets it
    (a user ``__init__``) gives it; ``e.nope`` raises eager's AttributeError, caught; a global is written."""
    def fn(x):
        global G_SEEN
        out = []
        for exc in (ValueError("a"), FuzzError("u", 7), KeyError("k")):
            try:
                raise exc
            except Exception as e:
                out.append(getattr(e, "code", -1))
                out.append(hasattr(e, "zz"))
        try:
            ValueError("b").nope
        except AttributeError as e:
            out.append(str(e))
        G_SEEN = len(out)
        return x + len(out), out

    diff = run_differential(fn, torch.ones(2), backend=CountingBackend(backend))
    assert diff.graph_count == 1 and G_SEEN == 7
    assert _breaks(fn, torch.ones(2)) == (1, [])


def test_missing_attribute_of_an_exception_uncaught_raises():
    """Uncaught, the AttributeError is eager's (a break: the frame runs eagerly)."""
    def fn(x):
        return x + ValueError("a").code

    run_differential(fn, torch.ones(2))


Pair = collections.namedtuple("Pair", ["t", "n"], defaults=[0])


class Summed(Pair):
    def __add__(self, other):
        return ("summed", len(other))


@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
def test_named_tuple_operators_of_tuple(backend):
    """``+``/``*``/``==`` on named tuples whose class keeps tuple's methods: tuple's (a plain tuple), one graph;
    a subclass's own ``__add__`` still answers."""
    def fn(x, p):
        a, b = Pair(x, 2), Pair(x * 2, 3)
        c = a + b
        return c[2] * c[-1], type(c).__name__, len(a * 2), a == a, p + a, Summed(x, 1) + a, (1, 2) + Pair(1, 2)

    diff = run_differential(fn, torch.ones(2), Pair(1, 2), backend=CountingBackend(backend))
    assert diff.graph_count == 1
    assert _breaks(fn, torch.ones(2), Pair(1, 2)) == (1, [])


def test_ordered_dict_equality_compares_order():
    """Two OrderedDicts holding tensors: dict equality of the values, then the order of the keys; a plain dict
    against one ignores the order; a global written."""
    def fn(x):
        global G_SEEN
        od1 = collections.OrderedDict(a=x, b=1)
        od2 = collections.OrderedDict(b=1, a=x)
        od3 = collections.OrderedDict(a=x, b=1)
        G_SEEN = (od1 == od2, od1 == od3, od1 != od2, od1 != od3, dict(b=1, a=x) == od1, od1 == {"a": x})
        return x + sum(G_SEEN)

    diff = run_differential(fn, torch.ones(2))
    assert diff.graph_count == 1 and G_SEEN == (False, True, True, False, True, False)
    assert _breaks(fn, torch.ones(2)) == (1, [])


def test_ordered_dict_equality_of_tensor_values_breaks():
    """Values that are different tensors: their ``==`` is a tensor, whose truth needs its values (a break)."""
    def fn(x):
        return collections.OrderedDict(a=x) == collections.OrderedDict(a=x + 0)

    run_differential(fn, torch.ones(1))
    assert _breaks(fn, torch.ones(1))[1]


_END = object()


def test_is_between_a_symbolic_int_and_an_object():
    """``k is _END`` with ``k`` a symbolic int: an int is never that object (False, no break), under
    automatic dynamic shapes (the third call makes ``k`` symbolic)."""
    import dynacap
    from dynacap import hook
    from dynacap.backends import lookup_backend
    from dynacap.capture import CaptureContext, CaptureRecord

    def fn(x, k):
        return x * k if k is not _END else x

    dynacap.reset()
    record = CaptureRecord()
    ctx = CaptureContext(lookup_backend("eager"), record=record)
    for k in (2, 3, 4, 5):
        torch.testing.assert_close(hook.call_with_callback(ctx.callback, fn, torch.ones(2), k), fn(torch.ones(2), k))
    assert len(record.graphs) == 2 and record.break_reasons == []


def test_base_exception_init_on_an_exception_from_the_frame():
    """A user exception's ``__init__`` (``super().__init__(msg)``, then an attribute) run on an exception
    object from the frame: its ``args`` changed after the graph and read back in it; one graph."""
    def fn(x, e):
        FuzzError.__init__(e, "again", 3)
        return x * len(e.args) + e.code, e.args

    def fresh():
        return (torch.ones(2), FuzzError("first", 1)), {}

    diff = run_differential(fn, torch.ones(2), FuzzError("first", 1), fresh_inputs=fresh)
    assert diff.graph_count == 1
    err = FuzzError("first", 1)
    import dynacap

    out = dynacap.optimize(fn, backend=CountingBackend())(torch.ones(2), err)
    assert err.args == ("again",) and err.code == 3 and out[1] == ("again",)
    assert _reasons(fn, torch.ones(2), FuzzError("first", 1)) == []


class KeywordError(Exception):
    def __init__(self, msg):
        super().__init__(msg, flag=1)


def test_base_exception_init_with_keywords_raises_as_eager():
    """``BaseException.__init__`` takes no keyword arguments: eager's TypeError (a break)."""
    def fn(x, e):
        KeywordError.__init__(e, "m")
        return x + 1

    run_differential(fn, torch.ones(2), KeywordError.__new__(KeywordError))


def test_identity_of_functions_made_in_the_trace():
    """A function made by ``MAKE_FUNCTION`` is only itself: ``wraps``' ``__wrapped__`` is another function, a
    function read back from a list is the same one; one graph."""
    import functools

    def fn(x):
        def deco(f):
            @functools.wraps(f)
            def inner(t):
                return f(t) * 2
            return inner

        @deco
        def hw(t):
            return t + 1

        held = [hw]
        flags = (hw.__wrapped__ is not hw, held[0] is hw, hw.__wrapped__ is hw.__wrapped__, deco is not hw)
        return hw(x) * sum(flags), flags

    diff = run_differential(fn, torch.ones(2))
    assert diff.graph_count == 1 and diff.result[1] == (True, True, True, True)
    assert _breaks(fn, torch.ones(2)) == (1, [])


class Acc:
    def __init__(self, t):
        self.t = t

    def add(self, v):
        self.t = self.t + v
        return self


def test_bound_method_identity_across_a_break():
    """After a break (``.item()``), a bound method and its object come from the resume's arguments: its
    ``__func__`` is the class's function (identity guarded) and ``==`` another bound method of the same
    object (guarded as a relation between them); no more breaks."""
    def fn(x, y):
        ob = Acc(y)
        m = getattr(ob, "add")
        m(x).add(round(x.amax().item(), 2))
        flags = (m.__func__ is Acc.add, m == ob.add, m.__self__ is ob, m == Acc(y).add)
        return ob.t * sum(flags), flags

    diff = run_differential(fn, torch.ones(2), torch.ones(2))
    assert diff.result[1] == (True, True, True, False)
    reasons = _breaks(fn, torch.ones(2), torch.ones(2))[1]
    assert len(reasons) == 1 and ".item()" in reasons[0], reasons


def _record_calls(fn, calls):
    """Run ``fn(*args)`` for each ``args`` under one capture context; the record (graphs, breaks)."""
    import dynacap
    from dynacap import hook
    from dynacap.backends import lookup_backend
    from dynacap.capture import CaptureContext, CaptureRecord

    dynacap.reset()
    record = CaptureRecord()
    ctx = CaptureContext(lookup_backend("eager"), record=record)
    for args in calls:
        expected = fn(*args)
        got = hook.call_with_callback(ctx.callback, fn, *args)
        assert type(got) is type(expected)
        for e, g in zip(expected, got):
            if isinstance(e, torch.Tensor):
                torch.testing.assert_close(g, e)
            else:
                assert g == e
    return record


def test_percent_format_of_a_symbolic_number():
    """``"%s-%.2f" % (k, k)`` once ``k`` is symbolic: the text needs its value, which specializes it (a
    guard), as ``"%s" % k`` does; no break."""
    def fn(x, k):
        text = "%s-%.2f-%5.1f" % (k, k, 3)
        return x * len(text), text

    record = _record_calls(fn, [(torch.ones(2), k) for k in (2, 3, 4, 5)])
    assert record.break_reasons == []


@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
def test_str_format_reads_only_the_fields_it_names(backend):
    """``"{k}".format(**locals())`` with tensors among the locals: only ``k`` is read (a constant), as
    ``str.format`` reads only the fields its template names; one graph, eager's text in a global."""
    def fn(x, k):
        global G_SEEN
        a = "{k}".format(**locals())
        b = "{}-{}".format(k, 2) + "{0}{n:>3}".format(k, x, n=3) + "{!r}".format("q")
        G_SEEN = a + b
        return x * len(a + b)

    diff = run_differential(fn, torch.ones(2), 3, backend=CountingBackend(backend))
    assert diff.graph_count == 1 and G_SEEN == "33-23  3'q'"
    assert _breaks(fn, torch.ones(2), 3) == (1, [])


def test_str_format_of_a_tensor_field_breaks():
    """A field that is a tensor (its text needs its values), or a nested spec: still breaks, eager's text."""
    def fn(x, k):
        return x + 1, "{t.shape}|{0:{1}}".format(k, 3, t=x)

    run_differential(fn, torch.ones(2), 3)
    assert _breaks(fn, torch.ones(2), 3)[1]


def test_operator_callables_leave_the_graph_as_eagers():
    """``itemgetter``/``attrgetter``/``methodcaller`` made in the trace (their models' functions) are made
    again as the real C objects when they leave it: on the stack at a break (``.item()`` in the call's
    argument), returned, stored in a global."""
    import operator

    def fn(x, y):
        g = operator.itemgetter(1, 0)
        n = g((round(y.sum().item(), 2), 3))[0]
        G_FUNCS.append(operator.attrgetter("shape", "t.shape"))
        return x * n, g, operator.methodcaller("add", 1, alpha=2), operator.itemgetter(2)

    import dynacap

    G_FUNCS.clear()
    expected = fn(torch.ones(2), torch.ones(2))
    got = dynacap.optimize(fn, backend=CountingBackend())(torch.ones(2), torch.ones(2))
    again = dynacap.optimize(fn, backend=CountingBackend())(torch.ones(2), torch.ones(2))
    torch.testing.assert_close(got[0], expected[0])
    assert [repr(v) for v in got[1:]] == [repr(v) for v in expected[1:]] == [repr(v) for v in again[1:]]
    assert [type(v) for v in got[1:]] == [operator.itemgetter, operator.methodcaller, operator.itemgetter]
    assert repr(got[2]) == "operator.methodcaller('add', 1, alpha=2)" and got[1]((1, 2)) == (2, 1)
    assert [repr(f) for f in G_FUNCS] == ["operator.attrgetter('shape', 't.shape')"] * 3
    out = dynacap.explain(fn)(torch.ones(2), torch.ones(2))
    reasons = [str(b.reason) for b in out.break_reasons]
    assert out.graph_count == 2 and len(reasons) == 1 and ".item()" in reasons[0], reasons  # resumed after it


def test_closure_over_a_deleted_argument_leaves_the_graph_empty():
    """``del x`` of an argument a closure holds: the rebuilt closure's cell is empty, as eager's (NameError when
    called); an argument never read in the trace is the one the call passed."""
    def fn(x, y):
        def get():
            return x

        def other():
            return y

        x + 1
        del x
        return get, other

    import dynacap

    get, other = dynacap.optimize(fn, backend=CountingBackend())(torch.ones(2), 5)
    with pytest.raises(NameError, match="free variable 'x'"):
        get()
    assert other() == 5
    e_get, _ = fn(torch.ones(2), 5)
    with pytest.raises(NameError, match="free variable 'x'"):
        e_get()


def test_closure_held_by_a_list_in_its_own_cell():
    """A function in a list its own closure holds: the list would be built before the function exists, so the
    cell would get another list; it is a break, and the frame returns eager's aliasing."""
    def fn(x):
        fns = []

        def f():
            return fns

        fns.append(f)
        return x + 1, fns

    import dynacap

    _, fns = dynacap.optimize(fn, backend=CountingBackend())(torch.ones(1))
    assert fns[0]() is fns
    assert any("its own closure" in r for r in _reasons(fn, torch.ones(1)))
