"""Backends: turn a captured ``GraphModule`` into a callable.

A backend is ``backend(gm, example_inputs) -> callable``.  Built in:
``eager`` (run the GraphModule), ``aot_eager`` (AOTAutograd with eager
kernels) and ``inductor`` (torch's compiler).  ``register_backend`` adds
more by name.  ``configured`` applies ``optimize``'s ``mode=``/``options=``
(handed to inductor as config patches, as ``torch.compile`` does).
Backends never see bytecode or guards.
"""
from __future__ import annotations

import warnings
from typing import Callable

import torch

_REGISTRY: dict[str, Callable] = {}


def register_backend(fn: Callable | None = None, *, name: str | None = None):
    """Register ``fn`` as a backend under ``name`` (default ``fn.__name__``); usable as a decorator."""

    def register(f):
        key = name or f.__name__
        _REGISTRY[key] = f
        return f

    return register(fn) if fn is not None else register


def list_backends() -> list[str]:
    return sorted(_REGISTRY)


def lookup_backend(backend) -> Callable:
    if callable(backend):
        return backend
    if backend not in _REGISTRY:
        raise ValueError(f"unknown dynacap backend {backend!r}; registered: {', '.join(list_backends())}")
    return _REGISTRY[backend]


@register_backend
def eager(gm: torch.fx.GraphModule, example_inputs):
    # The generated forward reads parameters and layers as `self.<name>`. Plain instance
    # attributes (the same objects, still registered) skip nn.Module.__getattr__ on every
    # call.  Only here: backends that swap parameters (AOTAutograd) must see the registered ones.
    for name, _ in [*gm.named_parameters(recurse=False), *gm.named_buffers(recurse=False),
                    *gm.named_children()]:
        gm.__dict__[name] = getattr(gm, name)
    return gm.forward


@register_backend
def aot_eager(gm: torch.fx.GraphModule, example_inputs):
    from functorch.compile import make_boxed_func
    from torch._functorch.aot_autograd import aot_module_simplified

    def boxed(g, _inputs):
        return make_boxed_func(g.forward)

    # As torch's own aot_eager: input mutations made under no_grad (``p.data = t`` is a ``set_``) stay in the graph.
    return aot_module_simplified(gm, example_inputs, fw_compiler=boxed, bw_compiler=boxed,
                                 keep_inference_input_mutations=True)


@register_backend
def inductor(gm: torch.fx.GraphModule, example_inputs, *, config_patches: dict | None = None):
    from torch._inductor.compile_fx import compile_fx

    return compile_fx(gm, example_inputs, config_patches=config_patches or {})


#: The modes of ``torch.compile`` and the inductor settings each turns on.
MODES = {
    "default": {},
    "reduce-overhead": {"triton.cudagraphs": True},
    "max-autotune-no-cudagraphs": {"max_autotune": True, "coordinate_descent_tuning": True},
    "max-autotune": {"max_autotune": True, "triton.cudagraphs": True, "coordinate_descent_tuning": True},
}

#: (backend, mode, options) -> the configured backend: equal options give the same object, so wrappers
#: made with them share one capture context (contexts are keyed by backend identity).
_configured: dict = {}


def configured(backend, mode: str | None = None, options: dict | None = None) -> Callable:
    """``backend`` with ``optimize``'s ``mode``/``options`` applied (the backend itself when neither is given).

    ``mode`` is one of ``MODES``; ``options`` is a dict of inductor settings (``"-"`` may stand for
    ``"_"``), checked against ``torch._inductor.config``.  Other backends take neither, as ``torch.compile``
    hands them on as keyword arguments such backends rarely accept.
    """
    compiler = lookup_backend(backend)
    if mode is not None and options is not None:
        raise ValueError("dynacap.optimize: give mode= or options=, not both (as torch.compile)")
    if mode is not None and mode not in MODES:
        raise ValueError(f"dynacap.optimize: unknown mode {mode!r}; known modes: {', '.join(MODES)}")
    if options is not None and not isinstance(options, dict):
        raise TypeError(f"dynacap.optimize: options= takes a dict of inductor settings, got {type(options).__name__}")
    if mode in (None, "default") and not options:
        return compiler
    if compiler is not inductor:
        raise ValueError(f"dynacap.optimize: mode= and options= configure the inductor backend; backend "
                         f"{getattr(compiler, '__name__', compiler)!r} takes neither")
    patches = _patches(mode, options)
    key = (mode, tuple(sorted((k, repr(v)) for k, v in patches.items())))
    if key not in _configured:
        def inductor_configured(gm, example_inputs):
            return inductor(gm, example_inputs, config_patches=patches)

        inductor_configured.__name__ = f"inductor[{mode or 'options'}]"
        _configured[key] = inductor_configured
    return _configured[key]


def _patches(mode: str | None, options: dict | None) -> dict:
    """The inductor config patches of a mode or an options dict, validated against inductor's settings."""
    requested = dict(MODES[mode]) if mode is not None else {}
    if mode in ("reduce-overhead", "max-autotune") and not torch.cuda.is_available():
        # CUDA graphs need a GPU; on CPU inductor ignores the setting, so say so and leave it out.
        rest = " (max-autotune without CUDA graphs)" if mode == "max-autotune" else ""
        warnings.warn(f"dynacap: mode={mode!r} uses CUDA graphs, which need a GPU; without one it falls back to "
                      f"the default mode{rest}", stacklevel=3)
        requested.pop("triton.cudagraphs")
    for key, value in (options or {}).items():
        requested[key.replace("-", "_")] = value
    if not requested:
        return requested
    from torch._inductor import config as inductor_config

    known = inductor_config.get_config_copy()
    for key, value in requested.items():
        if key not in known:
            raise ValueError(f"dynacap.optimize: unknown inductor option {key!r}")
        expected = inductor_config.get_type(key)
        if isinstance(expected, type) and not isinstance(value, expected):
            raise TypeError(f"dynacap.optimize: inductor option {key!r} takes a {expected.__name__}, "
                            f"got {type(value).__name__}")
    return requested
