"""Cache entries keep nothing alive: a captured model that is deleted frees its entries and graphs.

Entries live in code objects' ``co_extra``, which the garbage collector does not look into, so an
entry that held its model strongly would keep it (and its parameters) alive forever.
"""
import gc
import weakref

import pytest
import torch

import dynacap
from differential import CountingBackend, assert_same
from dynacap import hook

SOURCE = "def forward(self, x):\n    return self.fc(x).relu() * 2\n"


def _model(i: int) -> torch.nn.Module:
    """A model of its own class (its own forward code object, as with distinct model files)."""
    namespace: dict = {}
    exec(compile(SOURCE, f"<model {i}>", "exec"), namespace)
    cls = type(f"Model{i}", (torch.nn.Module,), {"forward": namespace["forward"]})
    model = cls()
    model.fc = torch.nn.Linear(8, 8)
    return model


@pytest.mark.parametrize("shared", [True, False])
def test_deleted_models_are_freed_without_reset(shared):
    refs, params = [], []
    with dynacap.config.patch(share_graphs_across_instances=shared):
        _capture_models(refs, params)
    gc.collect()
    assert sum(r() is not None for r in refs) <= 2
    assert sum(p() is not None for p in params) <= 2  # the graphs holding them went with the entries


def _capture_models(refs, params):
    for i in range(60):
        model = _model(i)
        x = torch.randn(2, 8)
        assert_same(model(x), dynacap.optimize(model, backend="eager")(x))
        refs.append(weakref.ref(model))
        params.append(weakref.ref(model.fc.weight))
        del model


@dynacap.config.patch(share_graphs_across_instances=False)  # entries per instance, held weakly
def test_a_dead_models_entries_are_dropped_and_others_kept():
    a, b = _model(100), _model(100)
    forward = type(a).forward.__code__
    type(b).forward = type(a).forward  # one code object, two instances
    backend = CountingBackend()
    x = torch.randn(2, 8)
    for m in (a, b):
        assert_same(m(x), dynacap.optimize(m, backend=backend)(x))
    assert len(hook.cache_entries(forward)) == 2
    del a
    gc.collect()
    assert len(hook.cache_entries(forward)) == 1
    assert_same(b(x), dynacap.optimize(b, backend=backend)(x))
    assert backend.compiles == 2  # b's entry was kept and hit


def test_reset_frees_everything():
    model = _model(200)
    ref = weakref.ref(model)
    opt = dynacap.optimize(model, backend="eager")
    opt(torch.randn(2, 8))
    del opt
    dynacap.reset()
    del model
    gc.collect()
    assert ref() is None
