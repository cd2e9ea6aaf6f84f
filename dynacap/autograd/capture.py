"""The compiler instance torch's C++ autograd engine drives while it walks one backward graph.

With compiled autograd on, the engine lifts every tensor, size, scalar and
hook of the backward graph into five lists (``PLACEHOLDERS``) and calls the
methods of ``BackwardCapture`` node by node, in the order it would run them:
C++ formulas (``apply_functional``), Python ``autograd.Function`` backwards
(``proxy_call_backward``), hooks (``tensor_pre_hook``, ``pre_hook``,
``post_hook``, ``post_acc_grad_hook``), ``accumulate_grad``.  Each call adds
FX nodes over fake tensors; ``end_capture`` hands the graph to
``program.BackwardProgram``.  Hooks, Python backwards and gradient
accumulation become *opaque* nodes (``OPAQUE``) that call the real object
every time the program runs, reading it from the ``hooks`` list the engine
fills anew on each backward, so a replaced hook is the one called.

Must not run a hook or a backward formula for real: capture happens on
fakes, and nothing observable happens before the program runs.  What this
protocol cannot capture faithfully raises ``Unsupported`` (before anything
ran), and the backward runs on the eager engine instead.
"""
from __future__ import annotations

import contextlib
import functools
import itertools
import operator

import torch
from torch._dispatch.python import enable_python_dispatcher
from torch._prims_common import clone_preserve_strides
from torch._subclasses import FakeTensorMode
from torch.fx.experimental.proxy_tensor import (
    ProxyTorchDispatchMode,
    PythonKeyTracer,
    disable_proxy_modes_tracing,
    fetch_object_proxy,
    track_tensor_tree,
)
from torch.fx.experimental.symbolic_shapes import DimDynamic, ShapeEnv, _suppress_guards

from ..graph.shapes import ShapeSource

#: The graph's placeholders, in the engine's calling order.
PLACEHOLDERS = ("inputs", "sizes", "scalars", "hooks", "packed_data")

_capture_ids = itertools.count()


class Unsupported(Exception):
    """This backward cannot be captured faithfully; the message says why (it is logged)."""


#: Captures started on this process and not closed yet: the engine does not close one whose method raised,
#: and its fake and proxy modes must not outlive the backward (``close_unfinished``).
_unfinished: list = []


def close_unfinished() -> None:
    """Exit the modes of captures a raised error left open (called when the backward call returns or raises)."""
    while _unfinished:
        _unfinished.pop().close()


# -- what opaque nodes call when the program runs ------------------------------------------------------------
def call_hook(hook, *args, hook_type: str):
    """A tensor, node or post-accumulate hook, called as the engine calls it (``None`` keeps the value)."""
    result = hook(*args)
    if result is None:
        return args[0]
    if hook_type == "post_acc_grad_hook":
        raise RuntimeError("Tensor post accumulate grad hooks should return None.")
    return result


class _SavedTensorsContext:
    """A Python ``autograd.Function``'s ctx whose ``saved_tensors`` are the program's lifted tensors."""

    def __init__(self, real, saved_tensors):
        self.real = real
        self.saved_tensors = saved_tensors

    def __getattr__(self, name):
        return getattr(self.real, name)


def call_backward(ctx, saved_tensors, *grads):
    """The ``backward`` of a Python ``autograd.Function`` (or a compiled forward's backward), on real tensors."""
    forward_cls = ctx._forward_cls
    if getattr(forward_cls, "boxed_grads_call", False):  # AOTAutograd's: the grads come as one list
        grads = (list(grads),)
    result = forward_cls.backward(_SavedTensorsContext(ctx, saved_tensors), *grads)
    return result if isinstance(result, tuple) else (result,)


def accumulate_grad(accumulate, variable, variable_grad, grad, has_post_hooks):
    """The engine's ``AccumulateGrad`` on a leaf (its ``.grad`` set as eager sets it)."""
    variable.grad = accumulate([grad], variable, variable_grad, has_post_hooks)[0]
    return variable.grad


def add_grads(old, new):
    """Two gradient contributions to one input, as the engine's input buffer sums them: an undefined one (``None``:
    a Python backward returned no gradient there) is skipped."""
    if old is None:
        return new
    if new is None:
        return old
    return torch.add(old, new)


#: Targets that run as they are (side effects, Python code): never inside a compiled graph.
OPAQUE = (call_hook, call_backward)


class _Op:
    """An engine function bound by name (a C++ node's formula, ``validate_outputs``, ``AccumulateGrad``).

    ``traceable`` ones are pure and may be compiled; the others run as they are (opaque).
    """

    def __init__(self, name, fn, traceable: bool):
        self.__name__ = self.__qualname__ = name
        self.fn = fn
        self.traceable = traceable

    def __call__(self, *args):
        return self.fn(*args)

    def __repr__(self):
        return f"autograd.{self.__name__}"


#: The engine's functions by the names it bound them under (once per process: the engine remembers the names).
_ops: dict[str, _Op] = {}
_custom_counts: dict[str, int] = {}


def is_opaque(node: torch.fx.Node) -> bool:
    """Whether a node runs as it is when the program runs (never inside a compiled graph)."""
    return node.op == "call_function" and (node.target in OPAQUE or (type(node.target) is _Op
                                                                        and not node.target.traceable))


class BackwardCapture:
    """One capture of a backward graph: the engine calls the protocol methods below, then ``close``."""

    def __init__(self, make_program, engine_hooks):
        self.make_program = make_program
        self.engine_hooks = engine_hooks  # the engine's entry point, handed over by dynacap.compiled_autograd
        self.stack = contextlib.ExitStack()
        self.shape_env = ShapeEnv()
        self.fake_mode = FakeTensorMode(allow_fallback_kernels=True, allow_non_fake_inputs=True,
                                        shape_env=self.shape_env)
        self.tracer = PythonKeyTracer()
        self.proxy_mode = ProxyTorchDispatchMode(self.tracer, "symbolic")
        self.ops = _ops
        self.symbol_proxies: dict = {}
        self.node_name = ""
        self.refused: str | None = None

    def close(self):
        self.stack.close()
        if self in _unfinished:
            _unfinished.remove(self)

    # -- the start: lifted values become placeholders ---------------------------------------------------------
    def begin_capture(self, inputs, sizes, scalars, origins, accumulate_grad, check_nans):
        if check_nans:
            raise Unsupported("anomaly detection (torch.autograd.detect_anomaly) checks every node for NaNs")
        self.id = next(_capture_ids)
        _unfinished.append(self)
        self.tracer.root = torch.nn.Module()
        self.tracer.graph = torch.fx.Graph(tracer_cls=PythonKeyTracer)
        self.tracer.tensor_attrs = {}
        (inputs_proxy, sizes_proxy, scalars_proxy, self.hooks_proxy, self.packed_proxy) = (
            self.tracer.create_proxy("placeholder", name, (), {}) for name in PLACEHOLDERS)
        self.stack.enter_context(enable_python_dispatcher())
        for i, tensor in enumerate(inputs):
            inputs[i] = self.fake_mode.from_tensor(tensor, source=ShapeSource(f"inputs[{i}]"))
        self._bind(inputs, [inputs_proxy[i] for i in range(len(inputs))])
        symbolic_sizes = [self.shape_env.create_unspecified_symint_and_symbol(v, ShapeSource(f"sizes[{i}]"),
                                                                              DimDynamic.DYNAMIC)
                          for i, v in enumerate(sizes)]
        for i, size in enumerate(symbolic_sizes):
            if isinstance(size, torch.SymInt):
                self.symbol_proxies[size.node] = sizes_proxy[i]
        for i, value in enumerate(scalars):
            source = ShapeSource(f"scalars[{i}]")
            if isinstance(value, int):
                scalars[i] = self.shape_env.create_unspecified_symint_and_symbol(value, source, DimDynamic.DYNAMIC)
            elif isinstance(value, float):
                symbol = self.shape_env.create_unspecified_symbol(value, source=source, dynamic_dim=DimDynamic.DYNAMIC)
                scalars[i] = self.shape_env.create_symfloatnode(symbol, hint=value, source=source)
            else:
                raise Unsupported(f"a lifted scalar of type {type(value).__name__}")
            if isinstance(scalars[i], (torch.SymInt, torch.SymFloat)):
                self.symbol_proxies[scalars[i].node] = scalars_proxy[i]
        self.stack.enter_context(self.fake_mode)
        self.stack.enter_context(self.proxy_mode)
        self.stack.enter_context(_suppress_guards(self.shape_env))
        return f"dynacap-backward-{self.id}", inputs, symbolic_sizes, scalars

    def set_node_origin(self, node_name, nodecall_index, pyobj):
        # Called before the engine swaps the node's saved values for fakes: the last point where raising
        # leaves the graph as it was (the eager engine then runs it).  Later errors are not fallbacks.
        self.node_name = node_name
        if pyobj is None:
            return
        forward_cls = getattr(pyobj, "_forward_cls", None)
        if forward_cls is not None and forward_cls.__name__ == "CheckpointFunction":
            raise Unsupported("reentrant activation checkpointing runs a backward inside the backward")
        if getattr(pyobj, "_compiled_autograd_backward_state", None) is not None:
            raise Unsupported(f"the backward of {forward_cls.__name__} needs state compiled autograd cannot lift")

    def log_compile_reasons(self, reasons):
        pass

    # -- C++ nodes ------------------------------------------------------------------------------------------
    def bind_function(self, fn_name, fn, is_custom_function, is_traceable):
        if is_custom_function:
            base = "CppNode" + fn_name
            count = _custom_counts.get(base, 0)
            _custom_counts[base] = count + 1
            fn_name = f"{base}{count}"
        self.ops[fn_name] = _Op(fn_name, fn, bool(is_traceable))
        return fn_name

    def apply_functional(self, fn_name, grads, args, output_metadata):
        return self.proxy_call(self._op(fn_name), (grads, *args), output_metadata)

    def proxy_call(self, fn, args, output_metadata):
        proxy = self.tracer.create_proxy("call_function", fn, args=self._proxies(args), kwargs={})
        result = [self.allocate_dummy() for _ in output_metadata]
        self._bind(result, [proxy[i] for i in range(len(result))])
        return result

    def validate_outputs(self, _, outputs, args, output_metadata):
        proxy = self.tracer.create_proxy("call_function", self._op("validate_outputs"),
                                         args=self._proxies((outputs, *args)), kwargs={})
        self._bind(outputs, proxy)
        return outputs

    def call_copy_slices_prologue(self, inputs, base_sizes, base_strides, base_offset, view_sizes, view_strides,
                                  view_offset):
        return self.proxy_call(copy_slices_prologue, (inputs, base_sizes, base_strides, base_offset, view_sizes,
                                                      view_strides, view_offset), [None] * 3)

    def call_copy_slices_epilogue(self, needs_input_grad, result, res, grad_slice):
        return self.proxy_call(copy_slices_epilogue, (needs_input_grad, result, res, grad_slice),
                               [None] * len(needs_input_grad))

    def allocate_dummy(self):
        with disable_proxy_modes_tracing():
            return torch.zeros([0, 123456789])  # a stand-in: its proxy is what the graph uses

    # -- Python nodes ---------------------------------------------------------------------------------------
    def proxy_call_backward(self, inputs, output_metadatas, saved_tensors, backward_idx, ctx,
                            maybe_backward_state_idx, opaque_object_indices=()):
        proxies = self.tracer.create_proxy("call_function", call_backward,
                                           (self.hooks_proxy[backward_idx], self._proxies(saved_tensors),
                                            *self._proxies(inputs)), {})
        with disable_proxy_modes_tracing():
            grads = []
            for i, meta in enumerate(output_metadatas):
                if meta is None:
                    grads.append(None)
                    continue
                layout, device, dtype, size = meta
                grads.append(torch.empty(size=size, dtype=dtype, layout=layout, device=device))
            self._bind(grads, [None if g is None else proxies[i] for i, g in enumerate(grads)])
        return tuple(grads)

    # -- gradient accumulation ------------------------------------------------------------------------------
    def accumulate(self, old, new):
        proxy = self.tracer.create_proxy("call_function", add_grads, (self._proxy(old), self._proxy(new)), {})
        result = self.allocate_dummy()
        self._bind([result], [proxy])
        return result

    def accumulate_grad(self, variable, variable_grad, grad, has_post_hooks=None):
        if has_post_hooks is None:
            raise RuntimeError("dynacap compiled autograd: the engine's AccumulateGrad protocol of another torch "
                               "release (no explicit current grad)")
        op = self.ops.get("accumulate_grad")
        if op is None:
            accumulate = self._op("AccumulateGrad")
            op = _Op("accumulate_grad", functools.partial(accumulate_grad, accumulate), traceable=False)
            if accumulate.fn is not None:
                self.ops["accumulate_grad"] = op
        proxy = self.tracer.create_proxy("call_function", op,
                                         (self._proxy(variable), self._proxy(variable_grad), self._proxy(grad),
                                          has_post_hooks), {})
        with disable_proxy_modes_tracing():
            result = torch.empty_like(variable)
        self._bind([result], [proxy])
        variable.grad = result
        return result

    # -- hooks ----------------------------------------------------------------------------------------------
    def _hook(self, hook_id, *args, hook_type):
        return self.tracer.create_proxy("call_function", call_hook,
                                        (self.hooks_proxy[hook_id], *self._proxies(args)), {"hook_type": hook_type})

    def tensor_pre_hook(self, inputs, hook_id, i):
        proxy = self._hook(hook_id, inputs[i], hook_type="tensor_pre_hook")
        inputs[i] = self._rebound(inputs[i], proxy)
        return inputs

    def cpp_tensor_pre_hook(self, inputs, hook_id, i):
        if "cpp_tensor_pre_hooks" not in self.ops:
            self.ops["cpp_tensor_pre_hooks"] = _Op("cpp_tensor_pre_hooks",
                                                   self.engine_hooks.call_cpp_tensor_pre_hooks, traceable=False)
        proxy = self.tracer.create_proxy("call_function", self.ops["cpp_tensor_pre_hooks"],
                                         (hook_id, self._proxy(inputs[i])), {})
        inputs[i] = self._rebound(inputs[i], proxy)
        return inputs

    def pre_hook(self, inputs, hook_id):
        proxy = self._hook(hook_id, inputs, hook_type="pre_hook")
        return [self._rebound(x, proxy[i]) for i, x in enumerate(inputs)]

    def post_hook(self, outputs, inputs, hook_id):
        proxy = self._hook(hook_id, outputs, inputs, hook_type="post_hook")
        return [self._rebound(x, proxy[i]) for i, x in enumerate(outputs)]

    def post_acc_grad_hook(self, tensor, hook_id):
        proxy = self._hook(hook_id, tensor, hook_type="post_acc_grad_hook")
        return [self._rebound(tensor, proxy)]

    def unpack_hook(self, hook_id, data_id):
        """A saved-tensor hook's unpack (``saved_tensors_hooks``, non-reentrant checkpointing), run with its node."""
        proxy = self.tracer.create_proxy("call_function", call_hook,
                                         (self.hooks_proxy[hook_id], self.packed_proxy[data_id]),
                                         {"hook_type": "unpack_hook"})
        result = self.allocate_dummy()
        self._bind([result], [proxy])
        return result

    # -- the end --------------------------------------------------------------------------------------------
    def end_capture(self, outputs):
        self.stack.close()
        if self.refused:  # every node has been put back by now: the eager engine can still run the graph
            raise Unsupported(self.refused)
        self.tracer.create_node("output", "output", (self.tracer.create_arg(self._proxy(outputs)),), {})
        graph = self.tracer.graph
        for node in graph.nodes:  # the fakes were stand-ins (allocate_dummy): their metadata is meaningless
            for key in ("tensor_meta", "example_value", "val"):
                node.meta.pop(key, None)
        placeholders = set(graph.find_nodes(op="placeholder"))
        graph.eliminate_dead_code(
            lambda node: node.op == "placeholder" or is_opaque(node) or node.is_impure()
            or (node.target is operator.getitem and node.args[0] in placeholders))
        order_as_eager(graph)
        gm = torch.fx.GraphModule(self.tracer.root, graph, f"Backward{self.id}")
        program = self.make_program(gm)
        return program.run, program

    # -- helpers --------------------------------------------------------------------------------------------
    def _op(self, name):
        """The engine function bound as ``name``.  The engine binds each once per process, to the first
        compiler that meets it: one bound to torch's own compiled autograd is unknown here.  Raising now would
        leave the node's saved values swapped for fakes, so the capture goes on and ``end_capture`` refuses it."""
        op = self.ops.get(name)
        if op is None:
            self.refused = (f"the autograd engine bound {name} to another compiled autograd (torch.compile's) "
                            "earlier in this process")
            op = _Op(name, None, traceable=True)
        return op

    def _rebound(self, tensor, proxy):
        """A fresh fake for a value a hook may have replaced, bound to the hook's result."""
        if tensor is None:
            return None
        with disable_proxy_modes_tracing():
            fresh = clone_preserve_strides(tensor)
            self._bind([fresh], [proxy])
        return fresh

    def _proxy(self, value):
        if value is None:
            return None
        if isinstance(value, (list, tuple)):
            return type(value)(self._proxy(v) for v in value)
        if isinstance(value, (torch.SymInt, torch.SymFloat)):
            return self.symbol_proxies[value.node]
        if not isinstance(value, torch.Tensor):
            return value
        return fetch_object_proxy(self.tracer, value).proxy

    def _proxies(self, args):
        return torch.utils._pytree.tree_map(self._proxy, args)

    def _bind(self, objects, proxies):
        track_tensor_tree(objects, proxies, constant=None, tracer=self.tracer)


def _hook_type(node) -> str | None:
    return node.kwargs.get("hook_type") if node.op == "call_function" and node.target is call_hook else None


def order_as_eager(graph: torch.fx.Graph) -> None:
    """Move each leaf's ``AccumulateGrad`` (with its tensor hooks) to where the eager engine runs it.

    The engine walks the graph for capture in a topological order of its own,
    but the eager engine runs an ``AccumulateGrad`` as soon as its gradient is
    complete (it has the highest priority in the ready queue), with the tensor
    hooks of its leaf just before and its post-accumulate hooks just after.
    Hooks of other nodes stay where the engine put them (next to their node).
    """
    nodes = list(graph.nodes)
    placeholders = [n for n in nodes if n.op == "placeholder"]
    anchor = placeholders[-1]
    for node in nodes:  # items of the lifted lists first, so that anything may move up past them
        if node.target is operator.getitem and node.args[0] in placeholders:
            anchor.append(node)
            anchor = node
    position = {n: i for i, n in enumerate(graph.nodes)}
    for node in list(graph.nodes):
        if not (type(node.target) is _Op and node.target.__name__ == "accumulate_grad"):
            continue
        chain = [node]
        grad = node.args[2]
        while isinstance(grad, torch.fx.Node) and _hook_type(grad) == "tensor_pre_hook" and len(grad.users) == 1:
            chain.insert(0, grad)
            grad = grad.args[1]
        members = set(chain)
        inputs = [a for n in chain for a in n.all_input_nodes if a not in members]
        after = max(inputs, key=position.__getitem__)
        for moved in chain:
            after.append(moved)
            after = moved
        variable = node.args[0]
        for user in list(variable.users):
            if _hook_type(user) == "post_acc_grad_hook":
                after.append(user)
                after = user
        position = {n: i for i, n in enumerate(graph.nodes)}


# -- CopySlices (an in-place write into a view), as the engine's CopySlices::apply does it ------------------
def copy_slices_prologue(inputs, base_sizes, base_strides, base_offset, view_sizes, view_strides, view_offset):
    grad = inputs[0]
    result = grad.new_empty_strided(base_sizes, base_strides)
    result.copy_(grad)
    grad_slice = result.as_strided(view_sizes, view_strides, view_offset - base_offset)
    return [result, grad_slice, grad_slice.clone(memory_format=torch.contiguous_format)]


def copy_slices_epilogue(needs_input_grad, result, res, grad_slice):
    grad_inputs = [None] * len(needs_input_grad)
    for i, needed in enumerate(needs_input_grad):
        if needed and res[i] is not None:
            if i == 0:
                grad_slice.copy_(res[i])
                grad_inputs[i] = result
            else:
                grad_inputs[i] = res[i]
    return grad_inputs
