"""Tests of the C frame hook ``dynacap._C`` with pure-Python callbacks.

They drive the hook directly (no torch, no capture pipeline): a callback hands
back replacement code objects and guards, and the tests check what runs, what
the callback and guards see, and that frames, references and memory stay sound.
They must not leave a callback set or a cache filled when they finish.
"""
import gc
import sys
import threading
import tracemalloc
import weakref

import pytest

try:
    from dynacap import _C as C
except ImportError:  # running from a checkout without `pip install -e .`
    import pathlib

    sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))
    from dynacap import _C as C


class Recorder:
    """Callback that replaces the codes in `table` and records what it saw.

    table: {original code: (guard, new code)}; any other code runs unchanged.
    """

    def __init__(self, table=None):
        self.table = dict(table or {})
        self.calls = []

    def __call__(self, code, func, f_locals, f_globals, f_builtins):
        self.calls.append((code, func, dict(f_locals), f_globals, f_builtins))
        return self.table.get(code)

    def seen(self, code):
        return [c for c in self.calls if c[0] is code]


class hooked:
    """Sets a callback on this thread for the duration of a with-block."""

    def __init__(self, callback):
        self.callback = callback

    def __enter__(self):
        self.previous = C.set_callback(self.callback)
        return self.callback

    def __exit__(self, *exc):
        C.set_callback(self.previous)


@pytest.fixture(autouse=True)
def clean_hook():
    assert not C.hook_installed(), "a previous test left a callback set"
    C.reset_cache_stats()
    codes = []
    yield codes
    for code in codes:
        C.clear_cache(code)
    assert C.set_callback(None) is None
    assert not C.hook_installed()


def clear_later(clean_hook, *codes):
    clean_hook.extend(codes)


def stats_delta(before):
    after = C.cache_stats()
    return {k: after[k] - before[k] for k in after}


# --- functions under test and their replacements ------------------------------

def add(a, b=2):
    return a + b


def add_new(a, b=2):
    return 100 + a + b


def varied(a, /, b, c=3, *args, d, e=5, **kw):
    return ("orig", a, b, c, args, d, e, kw)


def varied_new(a, /, b, c=3, *args, d, e=5, **kw):
    return ("new", a, b, c, args, d, e, kw)


def make_closure(k):
    def inner(x):
        return x + k
    return inner


def make_closure_new(k):
    def inner(x):
        return 1000 + x + k
    return inner


def cell_arg(a):
    def get():
        return a
    return get() + 1


def cell_arg_new(a):
    def get():
        return a * 10
    return get()


def cell_arg_plain(a):  # the same signature, but `a` is not a cell here
    return a * 100


def fib(n):
    return n if n < 2 else fib(n - 1) + fib(n - 2)


def fib_new(n):
    # Same recursion, written differently, so we can tell it ran.
    if n < 2:
        return n
    return fib(n - 2) + fib(n - 1)


def boom(x):
    y = x * 2
    raise ValueError(y)


def boom_new(x):
    y = x * 3
    z = [y]
    raise KeyError(z[0])


def boom_line():
    return boom_new.__code__.co_firstlineno + 3


def getframe(x):
    return None


def getframe_new(x):
    marker = x + 1
    return sys._getframe()


def call_other(x):
    return add(x)


def gen(n):
    for i in range(n):
        yield i


def helper(x):
    return x * 7


def noargs():
    box.append("noargs")  # noqa: F821 -- only run by exec with a `box` global


def side_effect(box):
    box.append("orig")
    return "orig"


def side_effect_new(box):
    box.append("new")
    return "new"


# --- replacement and argument passing -------------------------------------------

def test_replacement_runs_and_gets_arguments(clean_hook):
    clear_later(clean_hook, add.__code__)
    rec = Recorder({add.__code__: (None, add_new.__code__)})
    with hooked(rec):
        assert add(1) == 103
        assert add(1, 5) == 106
        assert add(b=7, a=1) == 108
    assert add(1) == 3  # hook gone: the original again
    first = rec.seen(add.__code__)
    assert len(first) == 1  # later calls hit the cache
    code, func, f_locals, f_globals, f_builtins = first[0]
    assert func is add
    assert f_locals == {"a": 1, "b": 2}  # default already applied
    assert f_globals is globals()
    assert f_builtins is add.__builtins__ or f_builtins is __builtins__
    assert [e[1] for e in C.cache_entries(add.__code__)] == [add_new.__code__]


def test_all_argument_kinds(clean_hook):
    clear_later(clean_hook, varied.__code__)
    rec = Recorder({varied.__code__: (None, varied_new.__code__)})
    with hooked(rec):
        r1 = varied(1, 2, d=4)
        r2 = varied(1, 2, 3, 9, 10, d=4, e=6, z=7)
    assert r1 == ("new", 1, 2, 3, (), 4, 5, {})
    assert r2 == ("new", 1, 2, 3, (9, 10), 4, 6, {"z": 7})
    f_locals = rec.seen(varied.__code__)[0][2]
    assert f_locals == {"a": 1, "b": 2, "c": 3, "args": (), "d": 4, "e": 5, "kw": {}}


def test_closure_free_variables(clean_hook):
    f = make_closure(5)
    new = make_closure_new(0).__code__
    clear_later(clean_hook, f.__code__)
    rec = Recorder({f.__code__: (None, new)})
    with hooked(rec):
        assert f(1) == 1006  # new code, original closure (k=5)
        assert make_closure(7)(1) == 1008  # same code object, another closure
    assert rec.seen(f.__code__)[0][2] == {"x": 1, "k": 5}


def test_empty_cell_free_variable_is_omitted(clean_hook):
    def outer():
        def inner(x):
            return later if x else x

        seen = inner.__code__
        later = None  # noqa: F841 -- assigned below, after the call
        del later
        return inner, seen

    inner, code = outer()
    rec = Recorder()
    with hooked(rec):
        assert inner(0) == 0
    assert rec.seen(code)[0][2] == {"x": 0}


def test_cell_arguments(clean_hook):
    clear_later(clean_hook, cell_arg.__code__, cell_arg_plain.__code__)
    rec = Recorder({cell_arg.__code__: (None, cell_arg_new.__code__)})
    with hooked(rec):
        assert cell_arg(3) == 30
    # The callback sees the raw argument, not the cell MAKE_CELL would build.
    assert rec.seen(cell_arg.__code__)[0][2] == {"a": 3}

    C.clear_cache(cell_arg.__code__)
    # A cell argument replaced by a plain one, and the reverse.
    rec = Recorder({
        cell_arg.__code__: (None, cell_arg_plain.__code__),
        cell_arg_plain.__code__: (None, cell_arg_new.__code__),
    })
    with hooked(rec):
        assert cell_arg(2) == 200
        assert cell_arg_plain(2) == 20


def test_code_replace_and_original_code_as_replacement(clean_hook):
    clear_later(clean_hook, add.__code__, cell_arg.__code__)
    new = add.__code__.replace(co_name="add_patched")
    # The original code itself is a valid replacement (what a capture that
    # gives up returns): it runs in a shadow frame like any other.
    rec = Recorder({add.__code__: (None, new),
                    cell_arg.__code__: (None, cell_arg.__code__)})
    with hooked(rec):
        assert add(1, 1) == 2
        assert cell_arg(4) == 5
        assert cell_arg(5) == 6
    assert C.cache_stats()["shadow_runs"] == 3


# --- guards, misses, None ----------------------------------------------------------

def test_guards_select_entries_and_misses_call_back(clean_hook):
    clear_later(clean_hook, add.__code__)
    positive = add_new.__code__
    negative = add.__code__.replace()  # an equal but distinct copy
    guard_pos = lambda L, G: L["a"] >= 0  # noqa: E731
    guard_neg = lambda L, G: L["a"] < 0  # noqa: E731
    guard_calls = []

    def callback(code, func, f_locals, g, b):
        if code is add.__code__:
            guard_calls.append(f_locals["a"])
            return (guard_pos, positive) if f_locals["a"] >= 0 else (guard_neg, negative)
        return None

    before = C.cache_stats()
    with hooked(callback):
        assert add(1) == 103   # miss -> positive
        assert add(2) == 104   # hit
        assert add(-1) == 1    # miss -> negative (plain add semantics)
        assert add(-5) == -3   # hit, second entry (moves to front)
        assert add(3) == 105   # hit
    assert guard_calls == [1, -1]
    d = stats_delta(before)
    assert d["misses"] >= 2 and d["callback_calls"] >= 2
    assert d["hits"] >= 3 and d["shadow_runs"] >= 5
    entries = C.cache_entries(add.__code__)
    assert [e[0] for e in entries] == [guard_pos, guard_neg]  # MRU first


def test_guard_receives_locals_and_globals(clean_hook):
    clear_later(clean_hook, add.__code__)
    got = []

    def guard(f_locals, f_globals):
        got.append((dict(f_locals), f_globals))
        return True

    with hooked(Recorder({add.__code__: (guard, add_new.__code__)})):
        add(4)
        add(5, b=1)
    assert got == [({"a": 5, "b": 1}, globals())]


def test_none_result_runs_original_without_caching(clean_hook):
    rec = Recorder()
    with hooked(rec):
        assert add(1) == 3
        assert add(1) == 3
    assert len(rec.seen(add.__code__)) == 2
    assert C.cache_entries(add.__code__) == []


def test_falsy_guard_result_and_raising_guard_are_misses(clean_hook):
    clear_later(clean_hook, add.__code__)

    def bad_guard(L, G):
        raise RuntimeError("guard failed")

    rec = Recorder({add.__code__: (bad_guard, add_new.__code__)})
    with hooked(rec):
        assert add(1) == 103  # miss -> entry added and run
        assert add(1) == 103  # guard raises: miss again, another entry appended
        assert sys.exc_info() == (None, None, None)
    assert len(rec.seen(add.__code__)) == 2
    assert len(C.cache_entries(add.__code__)) == 2

    C.clear_cache(add.__code__)
    rec = Recorder({add.__code__: (lambda L, G: 0, add_new.__code__)})
    with hooked(rec):
        add(1)
        add(1)
    assert len(rec.seen(add.__code__)) == 2


class Interrupt(BaseException):
    pass


def test_guard_raising_base_exception_propagates(clean_hook):
    clear_later(clean_hook, side_effect.__code__)

    def guard(L, G):
        raise Interrupt

    box = []
    rec = Recorder({side_effect.__code__: (guard, side_effect_new.__code__)})
    with hooked(rec):
        assert side_effect(box) == "new"
        with pytest.raises(Interrupt):
            side_effect(box)
    assert box == ["new"]  # the interrupted call ran nothing
    assert len(rec.seen(side_effect.__code__)) == 1


def test_set_skip_and_clear_cache(clean_hook):
    clear_later(clean_hook, add.__code__)
    rec = Recorder({add.__code__: (None, add_new.__code__)})
    C.set_skip(add.__code__)
    assert C.is_skip(add.__code__)
    with hooked(rec):
        assert add(1) == 3
    assert rec.seen(add.__code__) == []
    C.clear_cache(add.__code__)
    assert not C.is_skip(add.__code__)
    with hooked(rec):
        assert add(1) == 103
    assert len(rec.seen(add.__code__)) == 1
    assert len(C.cache_entries(add.__code__)) == 1
    C.clear_cache(add.__code__)
    assert C.cache_entries(add.__code__) == []


def test_skip_set_from_callback(clean_hook):
    clear_later(clean_hook, add.__code__)
    calls = []

    def callback(code, *rest):
        calls.append(code)
        C.set_skip(code)
        return None

    with hooked(callback):
        add(1)
        add(2)
    assert calls.count(add.__code__) == 1


def test_bad_arguments_and_results(clean_hook):
    with pytest.raises(TypeError):
        C.set_callback(42)
    with pytest.raises(TypeError):
        C.set_skip(add)
    with pytest.raises(TypeError):
        C.cache_entries("nope")
    assert C.cache_entries(helper.__code__) == []
    assert not C.is_skip(helper.__code__)

    for bad in [42, (None,), (None, add), (3, add_new.__code__),
                (None, varied_new.__code__),            # other arguments
                (None, fib.__code__),                    # argument names differ
                (None, make_closure_new(0).__code__),    # free vars differ
                (None, gen.__code__)]:                   # generator
        with hooked(lambda code, *r, bad=bad: bad if code is add.__code__ else None):
            with pytest.raises(TypeError):
                add(1)
        assert C.cache_entries(add.__code__) == []


def test_incompatible_replacements_are_refused(clean_hook):
    def renamed(x, b=2):
        return x

    def closure(k2):
        def inner(x):
            return x + k2
        return inner

    def gen_add(a, b=2):
        yield a + b

    f = make_closure(1)
    cases = [(add, renamed.__code__, "argument names differ"),
             (add, varied_new.__code__, "argument counts or kinds differ"),
             (f, closure(1).__code__, "free variables differ"),
             (f, (lambda x: x).__code__, "free variables differ"),
             (add, gen_add.__code__, "plain function body")]
    for fn, bad, message in cases:
        with hooked(lambda code, *r: (None, bad) if code is fn.__code__ else None):
            with pytest.raises(TypeError, match=message):
                fn(1)
        assert C.cache_entries(fn.__code__) == []


# --- recursion and nesting ------------------------------------------------------------

def test_recursion_through_cached_entry(clean_hook):
    clear_later(clean_hook, fib.__code__)
    rec = Recorder({fib.__code__: (lambda L, G: True, fib_new.__code__)})
    before = C.cache_stats()
    with hooked(rec):
        assert fib(20) == 6765
    calls = 21891  # calls of fib for n=20
    d = stats_delta(before)
    assert len(rec.seen(fib.__code__)) == 1
    assert d["hits"] == calls - 1
    assert d["shadow_runs"] == calls


def test_callees_of_replaced_frame_are_intercepted(clean_hook):
    clear_later(clean_hook, call_other.__code__, add.__code__)
    rec = Recorder({
        call_other.__code__: (None, call_other.__code__.replace()),
        add.__code__: (None, add_new.__code__),
    })
    with hooked(rec):
        assert call_other(1) == 103
    assert len(rec.seen(add.__code__)) == 1


def test_deep_recursion_raises_recursion_error(clean_hook):
    def down(n):
        return down(n + 1)

    clear_later(clean_hook, down.__code__)
    with hooked(Recorder({down.__code__: (None, down.__code__.replace())})):
        with pytest.raises(RecursionError):
            down(0)
        assert add(1) == 3  # still sane afterwards


def test_frames_started_inside_callback_and_guard_not_intercepted(clean_hook):
    clear_later(clean_hook, add.__code__)
    seen = []

    def guard(L, G):
        helper(2)
        add(0)  # would recurse into the hook if not passed through
        return True

    def callback(code, *rest):
        seen.append(code)
        helper(1)
        assert add(1) == 3  # the original, not intercepted
        if code is add.__code__:
            return (guard, add_new.__code__)
        return None

    with hooked(callback):
        assert add(5) == 107
        assert add(6) == 108
    assert helper.__code__ not in seen
    assert seen.count(add.__code__) == 1


def test_frames_the_garbage_collector_runs_are_not_intercepted(clean_hook):
    # A gc callback, a finalizer or a weakref callback runs whenever a collection happens to start,
    # inside whatever frame allocated last: never code of the program to capture.
    seen = []
    ran = []

    def on_gc(phase, info):
        ran.append(phase)
        helper(3)

    class Finalized:
        def __del__(self):
            helper(4)

    def make_cycle():
        a = Finalized()
        a.self = a

    gc.callbacks.append(on_gc)
    try:
        with hooked(lambda code, *rest: seen.append(code)):
            make_cycle()
            gc.collect()
    finally:
        gc.callbacks.remove(on_gc)
    assert ran[-2:] == ["start", "stop"]
    assert make_cycle.__code__ in seen
    assert on_gc.__code__ not in seen
    assert Finalized.__del__.__code__ not in seen
    assert helper.__code__ not in seen


def test_callback_that_raises(clean_hook):
    box = []

    def callback(code, *rest):
        if code is side_effect.__code__:
            raise ValueError("callback failed")
        return None

    with hooked(callback):
        with pytest.raises(ValueError, match="callback failed"):
            side_effect(box)
        assert add(1) == 3
    assert box == []  # the frame was never run
    assert side_effect(box) == "orig"


def test_callback_replacing_itself(clean_hook):
    clear_later(clean_hook, add.__code__)
    second = Recorder({add.__code__: (None, add_new.__code__)})

    def first(code, *rest):
        C.set_callback(second)
        return None

    C.set_callback(first)
    try:
        assert add(1) == 3   # first: None
        assert add(1) == 103  # second
    finally:
        assert C.set_callback(None) is second


# --- frames, exceptions, tracebacks -----------------------------------------------------

def test_exception_traceback_frames_are_inspectable(clean_hook):
    clear_later(clean_hook, boom.__code__)
    with hooked(Recorder({boom.__code__: (None, boom_new.__code__)})):
        try:
            boom(5)
        except KeyError as e:
            exc = e
    assert exc.args == (15,)
    tb = exc.__traceback__
    frames = []
    while tb is not None:
        frames.append((tb.tb_frame, tb.tb_lineno))
        tb = tb.tb_next
    gc.collect()
    frame, lineno = frames[-1]
    assert frame.f_code is boom_new.__code__
    assert lineno == boom_line()
    assert frame.f_lineno == boom_line()
    assert frame.f_locals == {"x": 5, "y": 15, "z": [15]}
    assert frame.f_back.f_code is test_exception_traceback_frames_are_inspectable.__code__
    assert frame.f_globals is globals()
    import traceback
    text = "".join(traceback.format_exception(exc))
    assert "boom_new" in text and "raise KeyError(z[0])" in text
    frame.clear()
    del exc, frames, frame


def test_getframe_kept_past_return(clean_hook):
    clear_later(clean_hook, getframe.__code__)
    with hooked(Recorder({getframe.__code__: (None, getframe_new.__code__)})):
        frames = []
        for i in range(3):
            frames.append(getframe(i))
    gc.collect()
    [(f.f_locals, f.f_code) for f in frames]  # touch them all after return
    f = frames[1]
    assert f.f_code is getframe_new.__code__
    assert f.f_locals == {"x": 1, "marker": 2}
    assert f.f_back is sys._getframe()
    assert f.f_lineno == getframe_new.__code__.co_firstlineno + 2
    del frames, f
    gc.collect()


def test_live_frame_of_replacement(clean_hook):
    seen = {}

    def probe(a):
        return seen and a

    def probe_new(a):
        f = sys._getframe()
        seen["name"] = f.f_code.co_name
        seen["back"] = f.f_back.f_code.co_name
        seen["locals"] = sorted(f.f_locals)
        return a * 2

    clear_later(clean_hook, probe.__code__)
    with hooked(Recorder({probe.__code__: (None, probe_new.__code__)})):
        assert probe(4) == 8
    assert seen == {"name": "probe_new", "back": "test_live_frame_of_replacement",
                    "locals": ["a", "f", "seen"]}


def test_settrace_sees_replacement_frames(clean_hook):
    clear_later(clean_hook, boom.__code__)
    events = []

    def tracer(frame, event, arg):
        if frame.f_code is boom_new.__code__:
            events.append((event, frame))
        return tracer

    with hooked(Recorder({boom.__code__: (None, boom_new.__code__)})):
        sys.settrace(tracer)
        try:
            with pytest.raises(KeyError):
                boom(1)
        finally:
            sys.settrace(None)
    kinds = [e for e, _ in events]
    assert kinds[0] == "call" and "exception" in kinds and kinds[-1] == "return"
    gc.collect()
    assert events[-1][1].f_locals == {"x": 1, "y": 3, "z": [3]}


# --- what is never intercepted ------------------------------------------------------------

def test_generators_class_bodies_exec_not_intercepted(clean_hook):
    rec = Recorder()

    def coro():
        return 1
        yield  # noqa

    async def acoro():
        return 2

    def catcher():
        try:
            yield 1
        except ValueError:
            yield "caught"
        finally:
            box.append("finally")

    box = []
    ns = {}
    with hooked(rec):
        assert list(gen(3)) == [0, 1, 2]

        class Body:
            x = helper(1)

        c = acoro()
        with pytest.raises(StopIteration):
            c.send(None)
        g = catcher()
        assert next(g) == 1
        assert g.throw(ValueError) == "caught"
        g.close()
        exec("def fn(q):\n    return q + 1\nresult = fn(1)", ns)
        exec(noargs.__code__, {"box": box})  # a function body run by exec
    seen = {c[0] for c in rec.calls}
    assert gen.__code__ not in seen
    assert acoro.__code__ not in seen and coro.__code__ not in seen
    assert catcher.__code__ not in seen
    assert not any(c.co_name in ("Body", "<module>") for c in seen)
    assert helper.__code__ in seen  # a plain call from the class body still is
    assert ns["fn"].__code__ in seen  # and so is a function defined by exec
    assert noargs.__code__ not in seen
    assert box == ["finally", "noargs"] and ns["result"] == 2


def test_generator_function_calls_inside_generators_are_intercepted(clean_hook):
    clear_later(clean_hook, add.__code__, boom.__code__)

    def g():
        yield add(1)
        marker = "in generator"  # noqa: F841
        yield boom(2)

    it = g()
    with hooked(Recorder({add.__code__: (None, add_new.__code__),
                          boom.__code__: (None, boom_new.__code__)})):
        assert next(it) == 103
        with pytest.raises(KeyError) as info:
            next(it)
    del it
    gc.collect()
    # The replaced frame's f_back is the (now finished) generator's frame.
    frame = info.value.__traceback__.tb_next.tb_next.tb_frame
    assert frame.f_code is boom_new.__code__
    assert frame.f_back.f_code is g.__code__
    assert frame.f_back.f_locals["marker"] == "in generator"


# --- threads and installation ----------------------------------------------------------------

def test_hook_installed_only_while_a_callback_is_set(clean_hook):
    assert not C.hook_installed()
    cb1, cb2 = Recorder(), Recorder()
    assert C.set_callback(cb1) is None
    assert C.hook_installed()
    assert C.set_callback(cb2) is cb1
    assert C.hook_installed()
    assert C.set_callback(None) is cb2
    assert not C.hook_installed()
    assert C.set_callback(None) is None
    assert not C.hook_installed()


def test_callback_is_per_thread(clean_hook):
    clear_later(clean_hook, add.__code__)
    threads = []

    class ThreadRecorder(Recorder):
        def __call__(self, *args):
            threads.append(threading.get_ident())
            return super().__call__(*args)

    rec = ThreadRecorder({add.__code__: (None, add_new.__code__)})
    ready, go, done = threading.Event(), threading.Event(), threading.Event()
    results = {}

    def worker():
        C.set_callback(rec)
        ready.set()
        go.wait(10)
        results["worker"] = add(1)
        C.set_callback(None)
        done.set()

    t = threading.Thread(target=worker)
    t.start()
    assert ready.wait(10)
    assert C.hook_installed()
    results["main"] = add(1)  # the worker's callback must not see this
    go.set()
    assert done.wait(10)
    t.join(10)
    assert threading.get_ident() not in threads
    assert len(rec.seen(add.__code__)) == 1
    assert results == {"main": 3, "worker": 103}
    assert not C.hook_installed()


def test_two_threads_with_own_callbacks(clean_hook):
    barrier = threading.Barrier(2)
    out = {}

    def worker(name):
        rec = Recorder()
        C.set_callback(rec)
        barrier.wait(10)
        helper(1)
        barrier.wait(10)
        C.set_callback(None)
        out[name] = sum(1 for c in rec.calls if c[0] is helper.__code__)

    ts = [threading.Thread(target=worker, args=(n,)) for n in "ab"]
    for t in ts:
        t.start()
    for t in ts:
        t.join(10)
    assert out == {"a": 1, "b": 1}
    assert not C.hook_installed()


def test_thread_exiting_with_callback_releases_hook(clean_hook):
    t = threading.Thread(target=C.set_callback, args=(Recorder(),))
    t.start()
    t.join(10)
    gc.collect()
    assert not C.hook_installed()


# --- lifetime: clear_cache mid-run, refcounts, memory ---------------------------------------

def test_clear_cache_while_entry_code_runs(clean_hook, monkeypatch):
    def target(x):
        return x

    # The replacement clears its own cache entry, then allocates and collects:
    # the entry held the last reference to the code that is running.
    ns = {}
    exec("def target(x):\n"
         "    if x == 2:\n"
         "        C.clear_cache(TARGET_CODE)\n"
         "        gc.collect()\n"
         "        junk = [object() for _ in range(1000)]\n"
         "    return [x] * 3\n", ns)
    new = ns.pop("target").__code__
    new_ref = weakref.ref(new)
    monkeypatch.setitem(globals(), "TARGET_CODE", target.__code__)  # runs with target's globals
    clear_later(clean_hook, target.__code__)
    rec = Recorder({target.__code__: (None, new)})
    del new
    with hooked(rec):
        assert target(1) == [1, 1, 1]  # miss: entry created
        rec.table.clear()              # now only the cache entry holds the code
        assert new_ref() is not None
        assert target(2) == [2, 2, 2]  # hit; clears the cache mid-run
        assert C.cache_entries(target.__code__) == []
        assert target(3) == 3          # miss, callback says None
    gc.collect()
    assert new_ref() is None


def test_clear_cache_from_guard(clean_hook):
    clear_later(clean_hook, add.__code__)

    def guard(L, G):
        C.clear_cache(add.__code__)
        gc.collect()
        return True

    ns = {}
    exec("def add(a, b=2):\n    return -(a + b)\n", ns)
    rec = Recorder({add.__code__: (guard, ns.pop("add").__code__)})
    with hooked(rec):
        assert add(1) == -3  # miss: entry created
        rec.table.clear()
        assert add(1) == -3  # hit; the guard empties the cache meanwhile
        assert add(1) == 3   # miss, callback returns None
    assert C.cache_entries(add.__code__) == []


def _cycle(callback, arg):
    C.set_callback(callback)
    try:
        add(arg)
        add(arg, 1)
        try:
            boom(arg)
        except KeyError as e:
            f = e.__traceback__.tb_next.tb_frame
            f.f_locals
            f.f_back
            del e, f
        getframe(arg).f_locals
    finally:
        C.set_callback(None)
    C.clear_cache(add.__code__)
    C.clear_cache(boom.__code__)
    C.clear_cache(getframe.__code__)


def test_no_reference_or_memory_leaks(clean_hook):
    clear_later(clean_hook, add.__code__, boom.__code__, getframe.__code__)
    guard = lambda L, G: L["b"] == 2  # noqa: E731
    new_code = add_new.__code__
    arg = 12345678901234567890  # a private object we can count

    def callback(code, func, f_locals, g, b):
        if code is add.__code__:
            return (guard, new_code)
        if code is boom.__code__:
            return (None, boom_new.__code__)
        if code is getframe.__code__:
            return (None, getframe_new.__code__)
        return None

    watched = [add, add.__code__, new_code, guard, callback, arg, boom.__code__,
               boom_new.__code__, getframe_new.__code__, globals()]
    for _ in range(50):
        _cycle(callback, arg)
    gc.collect()
    counts = [sys.getrefcount(o) for o in watched]

    tracemalloc.start()
    try:
        for _ in range(200):
            _cycle(callback, arg)
        gc.collect()
        base, _ = tracemalloc.get_traced_memory()
        for _ in range(3000):
            _cycle(callback, arg)
        gc.collect()
        now, _ = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert [sys.getrefcount(o) for o in watched] == counts
    assert now - base < 64 * 1024, f"memory grew by {now - base} bytes"


def test_stats_reset(clean_hook):
    with hooked(Recorder()):
        add(1)
    assert C.cache_stats()["callback_calls"] >= 1
    C.reset_cache_stats()
    assert C.cache_stats() == {"hits": 0, "misses": 0, "callback_calls": 0, "shadow_runs": 0}
