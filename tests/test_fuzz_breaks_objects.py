"""Break reasons the program fuzzer's programs hit (issue 8), removed mechanism by mechanism: each test is
differential (eager vs captured) and counts graphs; the cases that must still break or fall back are here too."""
from __future__ import annotations

import collections

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
