"""The user-facing entry points: ``optimize``, ``disable``, ``reset``.

``optimize`` returns a wrapper (for functions) or an ``OptimizedModule``
(for ``nn.Module``s) whose calls run with this thread's frame callback set,
so that the called frame and everything it calls are captured by the hook.
"""
from __future__ import annotations

import functools
import weakref

import torch

from . import compiled_autograd, config, hook
from .backends import configured
from .capture import CaptureContext


def optimize(fn_or_module=None, *, backend="inductor", fullgraph: bool = False, dynamic=None,
             mode: str | None = None, options: dict | None = None):
    """Capture ``fn_or_module`` into graphs compiled by ``backend``.

    Usable as ``@optimize``, ``@optimize(backend="eager")`` or ``optimize(model)``.  ``mode``
    (``"default"``, ``"reduce-overhead"``, ``"max-autotune"``, ``"max-autotune-no-cudagraphs"``) or
    ``options`` (a dict of inductor settings) configure the inductor backend, as in ``torch.compile``.
    """
    # Checked before anything is wrapped, so a bad mode fails at the decorator line.
    compiler = configured(backend, mode, options)
    if fn_or_module is None:
        return functools.partial(optimize, backend=compiler, fullgraph=fullgraph, dynamic=dynamic)
    # Wrappers with the same backend and options share one context, and so its cache entries.
    ctx = CaptureContext.shared(compiler, fullgraph=fullgraph, dynamic=dynamic)
    if isinstance(fn_or_module, torch.nn.Module):
        return OptimizedModule(fn_or_module, ctx)
    if not callable(fn_or_module):
        raise TypeError(f"dynacap.optimize expects a function or an nn.Module, got {type(fn_or_module).__name__}")
    return _wrap_function(fn_or_module, ctx)


def _wrap_function(fn, ctx: CaptureContext):
    @functools.wraps(fn)
    def captured(*args, **kwargs):
        if config.compiled_autograd:
            with compiled_autograd.enable(ctx.backend):
                return hook.call_with_callback(ctx.callback, fn, *args, **kwargs)
        return hook.call_with_callback(ctx.callback, fn, *args, **kwargs)

    captured._dynacap_orig = fn
    captured._dynacap_ctx = ctx
    return captured


class OptimizedModule(torch.nn.Module):
    """An ``nn.Module`` that runs the wrapped module under capture.

    The original is at ``._orig_mod``; parameters, ``state_dict()`` (same
    keys as the original) and attribute access pass through to it.
    """

    def __init__(self, mod: torch.nn.Module, ctx: CaptureContext):
        super().__init__()
        object.__setattr__(self, "_orig_mod", mod)
        object.__setattr__(self, "_dynacap_ctx", ctx)
        object.__setattr__(self, "_dynacap_entry", _module_entry(mod))

    def forward(self, *args, **kwargs):
        if config.compiled_autograd:
            with compiled_autograd.enable(self._dynacap_ctx.backend):
                return hook.call_with_callback(self._dynacap_ctx.callback, self._dynacap_entry, self._orig_mod,
                                               *args, **kwargs)
        return hook.call_with_callback(self._dynacap_ctx.callback, self._dynacap_entry, self._orig_mod,
                                       *args, **kwargs)

    def __getattr__(self, name):
        if name in ("_orig_mod", "_dynacap_ctx", "_dynacap_entry"):
            return self.__dict__[name]
        return getattr(self.__dict__["_orig_mod"], name)

    def __setattr__(self, name, value):
        if name in ("_orig_mod", "_dynacap_ctx", "_dynacap_entry"):
            object.__setattr__(self, name, value)
        else:
            setattr(self._orig_mod, name, value)

    def __delattr__(self, name):
        delattr(self._orig_mod, name)

    def __dir__(self):
        return sorted(set(dir(self._orig_mod)) | set(super().__dir__()))

    def __repr__(self):
        return f"OptimizedModule({self._orig_mod!r})"

    # Module-tree methods delegate so that the wrapper looks like the original.
    def state_dict(self, *args, **kwargs):
        return self._orig_mod.state_dict(*args, **kwargs)

    def load_state_dict(self, *args, **kwargs):
        return self._orig_mod.load_state_dict(*args, **kwargs)

    def named_parameters(self, *args, **kwargs):
        return self._orig_mod.named_parameters(*args, **kwargs)

    def parameters(self, recurse: bool = True):
        return self._orig_mod.parameters(recurse)

    def named_buffers(self, *args, **kwargs):
        return self._orig_mod.named_buffers(*args, **kwargs)

    def buffers(self, recurse: bool = True):
        return self._orig_mod.buffers(recurse)

    def named_children(self):
        return self._orig_mod.named_children()

    def children(self):
        return self._orig_mod.children()

    def named_modules(self, *args, **kwargs):
        return self._orig_mod.named_modules(*args, **kwargs)

    def modules(self):
        return self._orig_mod.modules()

    def train(self, mode: bool = True):
        self._orig_mod.train(mode)
        return self

    def _apply(self, fn, recurse=True):
        self._orig_mod._apply(fn, recurse)
        return self

    def zero_grad(self, set_to_none: bool = True):
        self._orig_mod.zero_grad(set_to_none)

    def requires_grad_(self, requires_grad: bool = True):
        self._orig_mod.requires_grad_(requires_grad)
        return self


def _module_entry(mod: torch.nn.Module):
    """The function an ``OptimizedModule`` calls its module through.

    A user module is called directly: ``Module.__call__`` runs its hooks
    eagerly and the hook captures ``forward``.  A module whose ``forward``
    is torch's own (``nn.Sequential``, a bare layer) would never be
    captured that way (torch's files are skipped), so it is called from a
    small generated function, one per module class (so that wrappers of
    the same class share cache entries), whose frame the hook captures.
    """
    from .skipfiles import is_skipped_file

    forward = getattr(type(mod).forward, "__code__", None)
    if forward is None or not is_skipped_file(forward.co_filename):
        return type(mod).__call__  # called as entry(module, *args): no extra frame per call
    entry = _module_entries.get(type(mod))
    if entry is None:
        namespace: dict = {}
        source = "def module_entry(module, /, *args, **kwargs):\n    return module(*args, **kwargs)\n"
        exec(compile(source, f"<optimized {type(mod).__name__}>", "exec"), namespace)
        entry = _module_entries[type(mod)] = namespace["module_entry"]
    return entry


#: module class -> its generated entry function (``_module_entry``).
_module_entries: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def disable(fn):
    """Decorator: ``fn`` and everything it calls run without capture."""
    if isinstance(fn, torch.nn.Module):
        raise TypeError("dynacap.disable takes a function; for a module, disable its forward")

    @functools.wraps(fn)
    def uncaptured(*args, **kwargs):
        return hook.call_with_callback(None, fn, *args, **kwargs)

    uncaptured._dynacap_disabled = True
    uncaptured._dynacap_orig = fn
    return uncaptured


def allow_in_graph(fn):
    """Decorator: calls of ``fn`` inside captured code are one opaque graph node (``fn`` itself).

    ``fn`` must be a function of tensors and constants that a backend can trace (its body runs on
    fake tensors while capturing, and inside the compiled graph); it is never inlined or broken inside.
    """
    if not callable(fn) or isinstance(fn, torch.nn.Module):
        raise TypeError("dynacap.allow_in_graph takes a function")
    fn._dynacap_allow_in_graph = True
    return fn


def reset() -> None:
    """Drop every cached compiled frame (and every skip mark)."""
    hook.reset_all()
    from . import capture, compiled_autograd, dynamic
    from .codegen import resume

    resume.clear()
    capture.reset()
    dynamic.reset()
    compiled_autograd.reset()


def unwrap(fn):
    """The original callable behind an ``optimize``/``disable`` wrapper or ``OptimizedModule``."""
    if isinstance(fn, OptimizedModule):
        return fn._orig_mod
    while hasattr(fn, "_dynacap_orig"):
        fn = fn._dynacap_orig
    return fn


