"""Lowering a captured torch-level graph to pre-dispatch ATen (the training IR of ``torch.export``).

The captured ``GraphModule`` calls torch functions on ``get_attr``
parameters (and ``call_module`` for layers kept whole).  ``lower`` lifts its
parameters and buffers into leading inputs and retraces it with
``make_fx(pre_dispatch=True)`` over an ``fx.Interpreter``, inside
``preserve_node_meta`` so that each ATen node inherits the metadata of the
torch-level node it came from (``stack_trace``, ``nn_module_stack``,
``source_fn_stack``).  No decompositions: quantizers match
CompositeImplicit ops such as ``aten.linear``.  mkldnn/nnpack are off while
tracing (and while capturing: ``backend_choice_off``), as in ``torch.export``,
so backend choice adds no shape guards.
With symbolic inputs the trace's own fakes (and ShapeEnv) are reused, so
this must run before capture freezes that ShapeEnv (inside the backend).
This module builds no ``ExportedProgram`` (``program.py`` does).
"""
from __future__ import annotations

from contextlib import contextmanager
from dataclasses import dataclass

import torch
import torch.fx as fx


@dataclass
class Lowered:
    """The ATen graph: its leading placeholders are ``state`` (by the captured graph's names), then the inputs."""

    gm: fx.GraphModule
    state_names: list[str]
    state: list[torch.Tensor]


class LoweringError(Exception):
    """Lowering failed at a torch-level node; ``node`` carries its ``stack_trace`` (the user's lines)."""

    def __init__(self, error: Exception, node: fx.Node | None):
        super().__init__(f"{type(error).__name__}: {error}")
        self.error = error
        self.node = node


class _LoweringInterpreter(fx.Interpreter):
    """Runs the captured graph under ``make_fx``; remembers the node it runs (to name the user's line).

    An ``autocast`` block is entered through ``torch.autocast``: called directly, the captured
    ``_enter_autocast`` node would only be recorded by pre-dispatch tracing (which expects the
    context manager to switch the mode), so the ops inside would be traced at full precision.
    """

    current: fx.Node | None = None

    def run_node(self, n):
        self.current = n
        return super().run_node(n)

    def call_function(self, target, args, kwargs):
        if target is torch.amp.autocast_mode._enter_autocast:
            mode = torch.autocast(*args, **kwargs)
            mode.__enter__()
            return mode
        if target is torch.amp.autocast_mode._exit_autocast:
            return args[0].__exit__(None, None, None)
        return super().call_function(target, args, kwargs)


@contextmanager
def backend_choice_off():
    """mkldnn, nnpack and cudnn off, as ``torch.export`` traces: choosing them adds size guards (``s < 16``).

    Only the ``enabled`` switches (``torch.backends.*.flags`` would also reset TF32 settings, with a warning).
    """
    switches = [(torch._C._get_mkldnn_enabled, torch._C._set_mkldnn_enabled),
                (torch._C._get_nnpack_enabled, torch._C._set_nnpack_enabled),
                (torch._C._get_cudnn_enabled, torch._C._set_cudnn_enabled)]
    before = [get() for get, _ in switches]
    for _, set_ in switches:
        set_(False)
    try:
        yield
    finally:
        for (_, set_), value in zip(switches, before):
            set_(value)


def lower(gm: fx.GraphModule, example_inputs: list) -> Lowered:
    """Retrace ``gm`` to ATen with its state lifted; ``example_inputs`` are real tensors or the trace's fakes."""
    from torch._guards import detect_fake_mode
    from torch.fx import traceback as fx_traceback
    from torch.fx.experimental.proxy_tensor import make_fx
    from torch.nn.utils.stateless import _reparametrize_module

    state = dict(gm.named_parameters(remove_duplicate=False))
    state.update(gm.named_buffers(remove_duplicate=False))
    names = list(state)
    fake_mode = detect_fake_mode(example_inputs)
    if fake_mode is not None:
        tracing_mode = "symbolic"
        state_inputs = [fake_mode.from_tensor(t, static_shapes=True) for t in state.values()]
    else:
        tracing_mode = "fake"
        state_inputs = list(state.values())
    interpreter = _LoweringInterpreter(gm)

    def flat_fn(*flat):
        with _reparametrize_module(gm, dict(zip(names, flat[: len(names)]))):
            out = interpreter.run(*flat[len(names):])
        return tuple(out)

    try:
        with fx_traceback.preserve_node_meta(), backend_choice_off():
            agm = make_fx(flat_fn, tracing_mode=tracing_mode, pre_dispatch=True)(*state_inputs, *example_inputs)
    except Exception as e:
        raise LoweringError(e, interpreter.current) from e
    return Lowered(agm, names, list(state.values()))
