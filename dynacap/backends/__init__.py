"""Backends: turn a captured ``GraphModule`` into a callable.

A backend is ``backend(gm, example_inputs) -> callable``.  Built in:
``eager`` (run the GraphModule), ``aot_eager`` (AOTAutograd with eager
kernels) and ``inductor`` (torch's compiler).  ``register_backend`` adds
more by name.  Backends never see bytecode or guards.
"""
from __future__ import annotations

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

    return aot_module_simplified(gm, example_inputs, fw_compiler=boxed, bw_compiler=boxed)


@register_backend
def inductor(gm: torch.fx.GraphModule, example_inputs):
    from torch._inductor.compile_fx import compile_fx

    return compile_fx(gm, example_inputs)
