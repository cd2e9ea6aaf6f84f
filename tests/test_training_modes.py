"""``optimize(..., mode=, options=)`` as ``torch.compile``: the inductor settings each hands on, the errors.

The settings are read where inductor receives them (``compile_fx``'s ``config_patches``, recorded by a stub),
so most checks compile nothing; one runs inductor for real with an option set.
"""
from __future__ import annotations

import warnings

import pytest
import torch

import dynacap
from differential import assert_same


def scaled(x):
    return x.sin() * 2 + 1


@pytest.fixture
def recorded_patches(monkeypatch):
    """Replace inductor's ``compile_fx`` with one that records its ``config_patches`` and runs the graph."""
    import torch._inductor.compile_fx as compile_fx_module

    seen: list[dict] = []

    def fake_compile_fx(gm, example_inputs, config_patches=None, **_):
        seen.append(dict(config_patches or {}))
        return gm.forward

    monkeypatch.setattr(compile_fx_module, "compile_fx", fake_compile_fx)
    dynacap.reset()
    yield seen
    dynacap.reset()


@pytest.mark.parametrize("mode, expected", [
    ("default", {}),
    ("max-autotune-no-cudagraphs", {"max_autotune": True, "coordinate_descent_tuning": True}),
])
def test_mode_hands_inductor_its_settings(recorded_patches, mode, expected):
    x = torch.randn(5)
    assert_same(scaled(x), dynacap.optimize(scaled, mode=mode)(x))
    assert recorded_patches == [expected]


def test_options_are_handed_to_inductor(recorded_patches):
    x = torch.randn(5)
    captured = dynacap.optimize(scaled, options={"max-autotune": True, "epilogue_fusion": False})
    assert_same(scaled(x), captured(x))
    assert recorded_patches == [{"max_autotune": True, "epilogue_fusion": False}]


@pytest.mark.skipif(torch.cuda.is_available(), reason="the CPU fallback of CUDA-graph modes")
@pytest.mark.parametrize("mode", ["reduce-overhead", "max-autotune"])
def test_cuda_graph_modes_fall_back_on_cpu_and_say_so(recorded_patches, mode):
    x = torch.randn(5)
    with pytest.warns(UserWarning, match="falls back to the default mode"):
        captured = dynacap.optimize(scaled, mode=mode)
    assert_same(scaled(x), captured(x))
    assert "triton.cudagraphs" not in recorded_patches[0]
    assert recorded_patches[0].get("max_autotune", False) is (mode == "max-autotune")


def test_equal_modes_share_one_capture_context():
    a = dynacap.optimize(scaled, mode="max-autotune-no-cudagraphs")
    b = dynacap.optimize(scaled, mode="max-autotune-no-cudagraphs")
    c = dynacap.optimize(scaled, options={"epilogue_fusion": False})
    assert a._dynacap_ctx is b._dynacap_ctx
    assert a._dynacap_ctx is not c._dynacap_ctx
    assert dynacap.optimize(scaled, mode="default")._dynacap_ctx is dynacap.optimize(scaled)._dynacap_ctx


@pytest.mark.parametrize("kwargs, error, message", [
    (dict(mode="fastest"), ValueError, "unknown mode 'fastest'; known modes: default, reduce-overhead"),
    (dict(options={"no_such_option": 1}), ValueError, "unknown inductor option 'no_such_option'"),
    (dict(options={"max_autotune": "yes"}), TypeError, "'max_autotune' takes a bool, got str"),
    (dict(options=[("max_autotune", True)]), TypeError, "options= takes a dict"),
    (dict(mode="default", options={}), ValueError, "give mode= or options=, not both"),
    (dict(backend="eager", mode="max-autotune-no-cudagraphs"), ValueError, "backend 'eager' takes neither"),
])
def test_bad_mode_or_options_fail_at_the_decorator(kwargs, error, message):
    with pytest.raises(error, match=message):
        dynacap.optimize(**kwargs)
    with pytest.raises(error, match=message):
        dynacap.optimize(scaled, **kwargs)


def test_default_mode_on_another_backend_is_accepted():
    x = torch.randn(5)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        captured = dynacap.optimize(scaled, backend="eager", mode="default")
    assert_same(scaled(x), captured(x))


def test_inductor_runs_with_an_option():
    x = torch.randn(16)
    captured = dynacap.optimize(scaled, options={"epilogue_fusion": False})
    torch.testing.assert_close(captured(x), scaled(x))


def test_decorator_form_warns_once_and_shares_the_context():
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        decorate = dynacap.optimize(mode="reduce-overhead")
        captured = decorate(scaled)
    if not torch.cuda.is_available():
        assert len([w for w in seen if "falls back" in str(w.message)]) == 1
    assert captured._dynacap_ctx is dynacap.optimize(scaled, mode="reduce-overhead")._dynacap_ctx
