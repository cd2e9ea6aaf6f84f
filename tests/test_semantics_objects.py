"""Semantics regressions (issue 7) for user objects: the engine's own inspection never runs user code.

Wrapping, guarding and attribute lookup look at objects through ``type(obj)`` and the class
dictionaries; a class's ``__getattribute__``/``__getattr__``, properties and descriptors run only
where the program reads the attribute, once, in program order.  Each test compares printed text,
results and exceptions with eager (``run_differential``), then graph counts.
"""
import collections.abc

import pytest
import torch

import dynacap
from differential import CountingBackend, run_differential

BACKENDS = ["eager", "aot_eager"]


class LoggingGetattribute:
    def __init__(self):
        self.scale = 2.0

    def __getattribute__(self, k):
        print("get", k)
        return super().__getattribute__(k)


class LoggingGetattr:
    def __init__(self):
        self.scale = 2.0

    def __getattr__(self, k):
        print("missing", k)
        return 3.0


class LoggingProperty:
    @property
    def scale(self):
        print("property scale")
        return 2.0


class LoggingDescriptor:
    def __get__(self, obj, cls):
        print("descriptor get")
        return 4.0


class WithDescriptor:
    scale = LoggingDescriptor()


class LiesAboutClass:
    """``isinstance`` on it reads ``__class__``: the engine must not."""

    def __init__(self):
        self.scale = 2.0

    @property
    def __class__(self):
        print("read __class__")
        return LiesAboutClass


def _times_scale(x, c):
    return x * c.scale


def _scale_and_other(x, c):
    return x * c.scale + c.other


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("make", [LoggingGetattribute, LoggingGetattr, LoggingProperty, WithDescriptor,
                                  LiesAboutClass], ids=lambda c: c.__name__)
def test_engine_runs_no_user_code_reading_an_attribute(backend, make):
    """Eager prints one line per read (or none); dynacap printed `get __class__` 32 times and more."""
    run_differential(_times_scale, torch.ones(3), make(), backend=CountingBackend(backend))


@pytest.mark.parametrize("backend", BACKENDS)
def test_getattr_fallback_runs_only_for_the_missing_name(backend):
    run_differential(_scale_and_other, torch.ones(3), LoggingGetattr(), backend=CountingBackend(backend))


CALLS = []


class Remapped:
    """``PretrainedConfig``-style: a class attribute map consulted by ``__getattribute__``."""

    attribute_map = {"hidden_size": "n_embd"}

    def __init__(self):
        self.n_embd = 3.0

    def __getattribute__(self, key):
        if key != "attribute_map" and key in super().__getattribute__("attribute_map"):
            key = super().__getattribute__("attribute_map")[key]
        return super().__getattribute__(key)


class Counting:
    """A hook with a side effect the capture keeps (a list append), through ``object.__getattribute__``."""

    def __init__(self):
        self.scale = 2.0

    def __getattribute__(self, key):
        CALLS.append(key)
        return object.__getattribute__(self, key)


def _remapped(x, c):
    has = hasattr(c, "missing")
    return x * c.hidden_size + c.n_embd + getattr(c, "other", 5.0), has, hasattr(c, "n_embd")


@pytest.mark.parametrize("backend", BACKENDS)
def test_overridden_getattribute_is_inlined_in_one_graph(backend):
    """`super().__getattribute__` is the generic lookup; hasattr/getattr defaults see the AttributeError."""
    diff = run_differential(_remapped, torch.ones(3), Remapped(), backend=CountingBackend(backend))
    assert diff.compiles_first == 1
    dynacap.reset()
    assert dynacap.explain(_remapped)(torch.ones(3), Remapped()).graph_break_count == 0


def test_guards_run_no_user_code():
    """The hook runs once per read, in the trace and in the run: guards and reloads bypass it."""
    dynacap.reset()
    backend = CountingBackend()
    captured = dynacap.optimize(_times_scale, backend=backend)
    c, x = Counting(), torch.ones(3)
    CALLS.clear()
    _times_scale(x, c)
    eager_calls = list(CALLS)
    for _ in range(3):
        CALLS.clear()
        assert torch.equal(captured(x, c), x * 2.0)
        assert CALLS == eager_calls == ["scale"]
    assert backend.compiles == 1
    c.scale = 5.0  # a changed attribute is seen by the guard (read past the hook)
    CALLS.clear()
    assert torch.equal(captured(x, c), x * 5.0)
    assert CALLS == ["scale"] and backend.compiles == 2


def test_instance_dict_get_in_a_hook():
    """``super().__getattribute__("__dict__").get(k)`` (transformers' heterogeneity mixin)."""

    class Config:
        def __init__(self, spec):
            self.size = 2.0
            if spec is not None:
                self._spec = spec

        def __getattribute__(self, key):
            spec = super().__getattribute__("__dict__").get("_spec")
            if spec is not None and key in spec:
                return 10.0
            return super().__getattribute__(key)

    for spec in (None, ("size",)):
        diff = run_differential(_size, torch.ones(2), Config(spec))
        assert diff.compiles_first == 1


def _size(x, c):
    return x * c.size


def test_function_code_attributes_are_constants():
    """``func.__code__.co_varnames`` (transformers' config-default decorators), guarded by the code."""

    def inner(self, a, use_cache=None):
        return a

    def f(x):
        return x + inner.__code__.co_varnames.index("use_cache") + len(inner.__code__.co_varnames)

    diff = run_differential(f, torch.ones(2))
    assert diff.compiles_first == 1


class Registry(dict):
    """``_CanRecordRegistry``-style: a dict subclass whose ``get`` calls ``super().get``."""

    def get(self, key):
        return super().get(key.upper()) or {}


REGISTRY = Registry(A={"hidden": 2.0})


def _registry(x):
    found = REGISTRY.get("a")
    missing = REGISTRY.get("b")
    return x * found["hidden"], missing


class Table:
    """A user mapping: ``__getitem__``/``__len__``/``__contains__`` written in Python."""

    _global = {"sdpa": 2.0}

    def __init__(self):
        self._local = {"eager": 3.0}

    def __getitem__(self, key):
        if key in self._local:
            return self._local[key]
        return self._global[key]

    def __len__(self):
        return len(self._local) + len(self._global)

    def __contains__(self, key):
        return key in self._local or key in self._global


TABLE = Table()


def _table(x):
    return x * TABLE["sdpa"] + TABLE["eager"] + len(TABLE)


class Layer:
    def forward(self, x):
        return x + 1


def _outermost(x, layer):
    return layer.forward(x) * (2 if type(layer).forward is Layer.forward else 3)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("fn, args", [(_registry, ()), (_table, ()), (_outermost, (Layer(),))],
                         ids=["dict_subclass_super_get", "user_mapping", "class_function_identity"])
def test_user_containers_in_one_graph(backend, fn, args):
    diff = run_differential(fn, torch.ones(2), *args, backend=CountingBackend(backend))
    assert diff.compiles_first == 1
    dynacap.reset()
    assert dynacap.explain(fn)(torch.ones(2), *args).graph_break_count == 0


def test_dict_subclass_entry_change_recompiles():
    """``super().get`` read the entry past the subclass: a changed entry fails the guard."""
    dynacap.reset()
    backend = CountingBackend()
    captured = dynacap.optimize(_registry, backend=backend)
    x = torch.ones(2)
    assert torch.equal(captured(x)[0], x * 2.0)
    REGISTRY["A"] = {"hidden": 5.0}
    REGISTRY["B"] = 1
    try:
        assert captured(x)[0].tolist() == [5.0, 5.0] and captured(x)[1] == 1
    finally:
        REGISTRY["A"] = {"hidden": 2.0}
        del REGISTRY["B"]
    assert backend.compiles == 2


class Interface(collections.abc.MutableMapping):
    """``GeneralInterface``-style: ``Mapping.get``/``Mapping.__contains__`` over a Python ``__getitem__``."""

    _global = {"sdpa": 2.0}

    def __init__(self):
        self._local = {}

    def __getitem__(self, key):
        if key in self._local:
            return self._local[key]
        return self._global[key]

    def __setitem__(self, key, value):
        self._local[key] = value

    def __delitem__(self, key):
        del self._local[key]

    def __iter__(self):
        return iter({**self._global, **self._local})

    def __len__(self):
        return len(self._global) + len(self._local)

    def get_interface(self, name, default=None):
        return super().get(name, default)


INTERFACE = Interface()


def _interface(x):
    return x * INTERFACE.get("sdpa") + INTERFACE.get_interface("sdpa")


@pytest.mark.parametrize("backend", BACKENDS)
def test_mapping_mixin_methods_in_one_graph(backend):
    """``Mapping.get`` (stdlib, never inlined) is modelled on the class's own ``__getitem__``."""
    diff = run_differential(_interface, torch.ones(2), backend=CountingBackend(backend))
    assert diff.compiles_first == 1
    dynacap.reset()
    assert dynacap.explain(_interface)(torch.ones(2)).graph_break_count == 0


REGISTERED = {Layer, Table}


def _membership(x):
    in_interface = "sdpa" in INTERFACE  # Mapping.__contains__, modelled on __getitem__
    return x * (2 if Layer in REGISTERED else 3) + (1 if "eager" in TABLE else 0) + in_interface


def test_in_over_sets_and_user_mappings_in_one_graph():
    diff = run_differential(_membership, torch.ones(2))
    assert diff.compiles_first == 1


class Chunked:
    def forward_chunk(self, a, b):
        return a + b


def _chunking(x, layer):
    """``apply_chunking_to_forward``: ``len(inspect.signature(fn).parameters)`` of a bound method."""
    import inspect

    n = len(inspect.signature(layer.forward_chunk).parameters)
    m = len(inspect.signature(_times_scale).parameters)
    return layer.forward_chunk(x, x) * n + m


@pytest.mark.parametrize("backend", BACKENDS)
def test_signature_of_a_function_is_a_constant(backend):
    diff = run_differential(_chunking, torch.ones(2), Chunked(), backend=CountingBackend(backend))
    assert diff.compiles_first == 1
    dynacap.reset()
    assert dynacap.explain(_chunking)(torch.ones(2), Chunked()).graph_break_count == 0


class WithSetter:
    def __init__(self):
        self._v = 1.0

    @property
    def v(self):
        print("get v")
        return self._v

    @v.setter
    def v(self, value):
        print("set v")
        self._v = value * 2


def _through_setter(x, p):
    p.v = 3.0
    return x * p.v


@pytest.mark.parametrize("backend", BACKENDS)
def test_assigning_a_property_runs_its_setter(backend):
    """A store to a property is not a plain attribute: the next read gives what the setter stored (6, not 3)."""
    run_differential(_through_setter, torch.ones(2), WithSetter(), backend=CountingBackend(backend),
                     fresh_inputs=lambda: ((torch.ones(2), WithSetter()), {}))


def _torch_ops(x):
    return torch.ops.aten.add(x, x)


def test_torch_namespaces_with_getattr_stay_torch():
    """``torch.ops`` namespaces have a ``__getattr__``: they are torch objects, not user objects."""
    dynacap.reset()
    assert dynacap.explain(_torch_ops)(torch.ones(2)).graph_break_count == 0


class PassThrough:
    def __init__(self):
        self.a = [1]

    def __getattribute__(self, key):
        return super().__getattribute__(key)


def _read_then_store(x, c):
    old = c.a
    c.a = [2]
    return x + 1, old


@pytest.mark.parametrize("backend", BACKENDS)
def test_value_read_past_the_hook_survives_a_store(backend):
    """The value read before ``c.a = ...`` is the old list (its source is loaded before the replay)."""
    run_differential(_read_then_store, torch.ones(2), PassThrough(), backend=CountingBackend(backend),
                     fresh_inputs=lambda: ((torch.ones(2), PassThrough()), {}))


def _isinstance_checks(x, c):
    return x * (2 if isinstance(c, int) else 3) + (1 if isinstance(c, collections.abc.Mapping) else 0)


@pytest.mark.parametrize("make", [LoggingGetattribute, LiesAboutClass], ids=lambda c: c.__name__)
def test_isinstance_reads_class_as_eager_does(make):
    """``isinstance`` reads ``obj.__class__`` (through the class's hooks) when the type alone does not decide."""
    run_differential(_isinstance_checks, torch.ones(2), make())


_SENTINEL = object()


class _Holder:
    def __init__(self, marker):
        self.marker = marker


def test_is_between_objects_from_the_frame_is_a_guarded_relation():
    import dynacap

    def f(x, holder):
        if holder.marker is _SENTINEL:
            return x + 1
        return x - 1

    backend = CountingBackend()
    opt = dynacap.optimize(f, backend=backend)
    x = torch.zeros(2)
    for marker in (_SENTINEL, object(), _SENTINEL):
        assert torch.equal(opt(x, _Holder(marker)), f(x, _Holder(marker)))
    assert backend.compiles == 2  # one entry per answer, no break
    assert dynacap.explain(f)(x, _Holder(_SENTINEL)).graph_break_count == 0


def test_dataclasses_fields_is_traced():
    import dataclasses

    import dynacap

    @dataclasses.dataclass
    class Out:
        a: torch.Tensor
        b: int = 3

    def f(x, out):
        return [fld.name for fld in dataclasses.fields(out)], x * 2 + out.b

    run_differential(f, torch.ones(2), Out(torch.ones(1)))
    out = dynacap.explain(f)(torch.ones(2), Out(torch.ones(1)))
    assert out.graph_break_count == 0, out


class SlotPair:
    __slots__ = ("a", "b")

    def __init__(self, a, b):
        self.a = a
        self.b = b

    def swap(self):
        self.a, self.b = self.b, self.a
        return self

    def __eq__(self, other):  # the differential compares the inputs after the call: slot by slot
        def held(o, name):
            return getattr(o, name, None)

        return type(self) is type(other) and all(
            (held(self, n) is None) == (held(other, n) is None) and (held(self, n) is None or
                                                                     torch.equal(held(self, n), held(other, n)))
            for n in ("a", "b", "c"))


class SlotTriple(SlotPair):
    __slots__ = ("c",)


class SlotLogged(SlotPair):
    __slots__ = ()

    def __setattr__(self, name, value):
        print("set", name)
        object.__setattr__(self, name, value)


def _slot_stores(s, x):
    s.swap()
    s.a = s.a * 2 + x
    if isinstance(s, SlotTriple):
        s.c = s.a + s.b
        del s.b
        return s.a - s.c
    return s.a - s.b


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("cls", [SlotPair, SlotTriple, SlotLogged])
def test_slot_stores_on_frame_objects_are_replayed_through_the_slot(cls, backend):
    # Stores into a __slots__ member of an object from the frame: later reads see them, and the object's
    # slots (compared after the call) hold what eager leaves, a deleted slot included.
    def fresh():
        return (cls(torch.ones(2), torch.zeros(2)), torch.ones(2) * 3), {}

    counting = CountingBackend(inner=backend)
    run_differential(_slot_stores, *fresh()[0], backend=counting, fresh_inputs=fresh)
    if cls is not SlotLogged:  # its own __setattr__ prints: a break
        assert counting.compiles == 1
    s = cls(torch.ones(2), torch.zeros(2))
    dynacap.optimize(_slot_stores, backend="eager")(s, torch.ones(2))
    assert torch.equal(s.a, torch.ones(2))
    if cls is SlotTriple:
        assert not hasattr(s, "b") and torch.equal(s.c, torch.ones(2) * 2)


class Foreign:
    __slots__ = ()


Foreign.a = SlotPair.__dict__["a"]  # a slot of another class: storing through it raises TypeError


def test_a_slot_of_another_class_is_not_stored_through():
    def fn(o, x):
        try:
            o.a = x
        except TypeError:
            return x + 1
        return x

    run_differential(fn, Foreign(), torch.ones(2))
