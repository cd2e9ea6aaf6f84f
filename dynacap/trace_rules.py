"""Trace rules: what a call into torch's own Python (or the few library functions traced) becomes.

One table, by dotted name.  A function's name is where its code lives plus
its qualified name (``torch.optim.adam.Adam.step``,
``torch._compile._disable_dynamo.<locals>.inner``), so a rule for a module
(``torch.optim``) covers everything defined in it, and the longest matching
name wins.  Each rule says what happens and why:

``GRAPH_OP``
    one ``call_function`` node, its fake result deciding the value kind:
    functions of tensors whose Python is argument checks and dispatch
    (``torch.nn.functional``), and every C function of torch.
``INLINE``
    traced like user code: torch's pure Python (optimizers, distributions,
    ``nn.utils``, quantized functional modules, pytree helpers).  A break
    inside is never resumed there: the whole call runs eagerly.
``EAGER``
    a graph break with the rule's reason (the autograd engine, file I/O,
    global random state, device runtimes, other compilers).
``COMPILER``
    answered as a compiler would, at capture time (``is_compiling()`` is
    True, ``is_scripting()`` False; ``graph_break()`` does nothing; a
    context-manager class such as ``record_function`` makes a block that
    does nothing).
``FOLD``
    run at capture time on constants, the answer a constant: questions
    whose answer is fixed for the process or guarded by the global-state
    guard (``cuda.is_available()``, ``is_grad_enabled()``).
``MODEL``
    a pure-Python model of the function (``dynacap.models``) is traced in
    its place: ``answer`` is ``(model, eager_reason)``, the second telling
    from the call's constant keyword arguments when the real one must run.
``SEE_THROUGH``
    a wrapper torch puts on its own functions for another compiler
    (``_disable_dynamo``): the wrapped function (``__wrapped__``) is
    traced under its rule.

Torch's Python that no rule names is inlined (``DEFAULT``), except in
torch's private packages (``torch._<name>``: ``PRIVATE``, run eagerly);
every public namespace has a rule of its own (``tests/test_trace_rules.py``
walks them).  ``torch.compiler.disable`` is told by the marker it leaves on
the function it returns (``values.library``), not by where its code lives.
Library code outside torch is never traced except the functions listed in
``LIBRARY_FUNCTIONS`` (most of them from the families in ``models``).  This module is data: it decides nothing about values
and imports nothing of the engine.
"""
from __future__ import annotations

import dataclasses
import enum
import os
import sysconfig
import types

import torch

from .models import checkpointing, class_factories, copying, foreach, iteration, operators, optimizers, strings
from .models import collections as collection_models, dataclasses as dataclass_models, functools as functools_models


class Rule(enum.Enum):
    GRAPH_OP = "a graph operation"
    INLINE = "traced"
    EAGER = "runs eagerly"
    COMPILER = "answered as a compiler"
    FOLD = "runs at capture time"
    SEE_THROUGH = "its wrapped function is traced"
    MODEL = "a model of it is traced"


@dataclasses.dataclass(frozen=True)
class TraceRule:
    name: str
    rule: Rule
    why: str
    #: For ``COMPILER`` rules: the answer (``None``: the call does nothing).
    answer: object = None
    #: For ``MODEL`` rules of a wrapper: the model's first argument is the wrapped function (``__wrapped__``).
    model_takes_wrapped: bool = False


def _never_eager(kwargs: dict) -> None:
    """A model's eager reason when no argument ever makes the real function run instead."""
    return None


G, I, E, C, F, S, M = Rule.GRAPH_OP, Rule.INLINE, Rule.EAGER, Rule.COMPILER, Rule.FOLD, Rule.SEE_THROUGH, Rule.MODEL

_TENSOR_FUNCTIONS = "functions of tensors: one node each (their Python is argument checks and dispatch)"
_AUTOGRAD = "runs the autograd engine (captured code records the forward only)"
_RANDOM = "reads or sets the global random state, which the graph would fix at capture time"
_DEVICE = "talks to the device runtime"
_OTHER_COMPILER = "drives another tracer or compiler"

_TABLE = (
    # Functions of tensors.
    TraceRule("torch.nn.functional", G, _TENSOR_FUNCTIONS),
    TraceRule("torch.functional", G, _TENSOR_FUNCTIONS),
    TraceRule("torch._tensor", G, "Tensor methods written in Python"),
    TraceRule("torch._tensor.Tensor.backward", E, _AUTOGRAD),
    TraceRule("torch._tensor.Tensor.register_hook", E, "registers a hook on a tensor"),
    TraceRule("torch.nn.init", G, "in-place initialisers of tensors"),
    TraceRule("torch._linalg_utils", G, _TENSOR_FUNCTIONS),
    TraceRule("torch._lowrank", G, _TENSOR_FUNCTIONS),
    TraceRule("torch._lobpcg", G, _TENSOR_FUNCTIONS),
    TraceRule("torch.masked", G, _TENSOR_FUNCTIONS),
    TraceRule("torch.sparse", G, _TENSOR_FUNCTIONS),
    TraceRule("torch.nested", G, _TENSOR_FUNCTIONS),
    TraceRule("torch.signal", G, _TENSOR_FUNCTIONS),
    TraceRule("torch._refs", G, _TENSOR_FUNCTIONS),
    TraceRule("torch._decomp", G, _TENSOR_FUNCTIONS),
    TraceRule("torch._prims", G, _TENSOR_FUNCTIONS),
    TraceRule("torch._prims_common", G, _TENSOR_FUNCTIONS),
    TraceRule("torch.__init__", G, "torch's top-level functions (is_tensor, typename, sym_* ...)"),
    TraceRule("torch.__init__.set_default_dtype", E, "changes global state"),
    TraceRule("torch.__init__.set_default_device", E, "changes global state"),
    TraceRule("torch.__init__.set_default_tensor_type", E, "changes global state"),
    TraceRule("torch.__init__.use_deterministic_algorithms", E, "changes global state"),
    TraceRule("torch.__init__.set_float32_matmul_precision", E, "changes global state"),
    TraceRule("torch.__init__.compile", E, _OTHER_COMPILER),
    # torch's pure Python, traced.
    TraceRule("torch.optim", I, "optimizers: their step is traced into the graph after the backward"),
    TraceRule("torch.optim.lr_scheduler", E, "learning-rate schedulers change optimizer settings between steps"),
    TraceRule("torch.distributions", I, "distributions are Python over tensor functions"),
    TraceRule("torch.ao.nn", I, "quantized functional modules are Python over tensor functions"),
    TraceRule("torch.nn.utils", I, "parametrizations, spectral/weight norm, gradient clipping: Python over tensors"),
    TraceRule("torch.nn.modules", I, "layers: inlined speculatively, one call_module node when they break"),
    TraceRule("torch.nn.parameter", I, "Parameter helpers"),
    TraceRule("torch.fx.immutable_collections", I, "immutable containers"),
    TraceRule("torch.utils._pytree", I, "pytree flattening of containers"),
    TraceRule("torch.utils._foreach_utils", I, "grouping of tensor lists for foreach kernels"),
    TraceRule("torch.utils.checkpoint", E, "activation checkpointing runs eagerly (its recomputation is autograd state)"),
    TraceRule("torch.utils.checkpoint.checkpoint", M,
              "non-reentrant checkpointing changes what autograd keeps, never a value: the function is traced",
              (checkpointing.checkpoint, checkpointing.eager_reason)),
    TraceRule("torch.utils.checkpoint.checkpoint_sequential", M,
              "non-reentrant checkpointing of each segment changes what autograd keeps, never a value: the "
              "segments are traced", (checkpointing.checkpoint_sequential, checkpointing.sequential_eager_reason)),
    TraceRule("torch._utils", I, "small helpers"),
    TraceRule("torch._jit_internal", I, "TorchScript annotations, which are plain Python when not scripting"),
    TraceRule("torch.jit", E, "TorchScript compilation"),
    TraceRule("torch.jit.annotate", I, "a TorchScript type annotation: returns its value"),
    TraceRule("torch.jit._trace.is_tracing", C, "never inside torch.jit.trace while dynacap captures", False),
    TraceRule("torch._jit_internal.is_scripting", C, "never TorchScript while dynacap captures", False),
    TraceRule("torch.autograd.profiler.record_function", C,
              "profiler ranges are not recorded inside captured code (the block itself is traced)"),
    # Compiler questions and markers.
    TraceRule("torch.compiler", E, "compiler controls run eagerly"),
    TraceRule("torch.compiler.is_compiling", C, "dynacap is a compiler: libraries take their compiler path", True),
    TraceRule("torch.compiler.is_exporting", F, "torch.export's own flag, read at capture time"),
    TraceRule("torch.compiler.is_dynamo_compiling", C, "dynacap is a compiler: libraries take their compiler path",
              True),
    TraceRule("torch._utils.is_compiling", C, "dynacap is a compiler: libraries take their compiler path", True),
    TraceRule("torch._compile._disable_dynamo.<locals>.inner", S,
              "torch marks its own functions for another compiler; the marker changes no result"),
    TraceRule("torch.compiler.disable", E, "disabled by the user (torch.compiler.disable)"),
    TraceRule("torch.optim.optimizer._use_grad_for_differentiable.<locals>._use_grad", M,
              "the step under the optimizer's grad mode, without the requests to split another compiler's "
              "graph", (optimizers.use_grad_for_differentiable, _never_eager), True),
    # Run eagerly.
    TraceRule("torch.autograd", E, _AUTOGRAD),
    TraceRule("torch.random", E, _RANDOM),
    TraceRule("torch.cuda", E, _DEVICE),
    TraceRule("torch.cuda.is_available", F, "fixed for the process"),
    TraceRule("torch.cuda.device_count", F, "fixed for the process"),
    TraceRule("torch.backends.mps.is_available", F, "fixed for the process"),
    TraceRule("torch.distributed.is_available", F, "fixed for the process"),
    # C functions with a rule of their own (any other C function of torch is a graph operation).
    TraceRule("torch._foreach_addcdiv_", M, "a tensor of scalars has no working fake kernel: smaller foreach ops",
              (foreach.addcdiv_, _never_eager)),
    TraceRule("torch._foreach_addcmul_", M, "a tensor of scalars has no working fake kernel: smaller foreach ops",
              (foreach.addcmul_, _never_eager)),
    TraceRule("torch.is_grad_enabled", F, "the grad mode: guarded, and followed through captured blocks"),
    TraceRule("torch.is_inference_mode_enabled", F, "guarded with the grad mode"),
    TraceRule("torch.get_default_dtype", F, "guarded with the global state"),
    TraceRule("torch.mps", E, _DEVICE),
    TraceRule("torch.xpu", E, _DEVICE),
    TraceRule("torch.backends", E, _DEVICE),
    TraceRule("torch.serialization", E, "reads or writes files"),
    TraceRule("torch.hub", E, "downloads and reads files"),
    TraceRule("torch.distributed", E, "collectives and RPCs run eagerly (distributed autograd keeps its graph)"),
    TraceRule("torch.multiprocessing", E, "starts processes"),
    TraceRule("torch.fx", E, _OTHER_COMPILER),
    TraceRule("torch.export", E, _OTHER_COMPILER),
    TraceRule("torch._export", E, _OTHER_COMPILER),
    TraceRule("torch._inductor", E, _OTHER_COMPILER),
    TraceRule("torch.onnx", E, _OTHER_COMPILER),
    TraceRule("torch.package", E, "imports and writes packages"),
    TraceRule("torch.func", E, "function transforms (vmap, grad) of Python functions are not captured"),
    TraceRule("torch._functorch", E, "function transforms (vmap, grad) of Python functions are not captured"),
    TraceRule("torch._higher_order_ops", E, "control-flow operators over Python functions are not captured"),
    TraceRule("torch.library", E, "registers operators"),
    TraceRule("torch._library", E, "registers operators"),
    TraceRule("torch.profiler", E, "profiling runs eagerly"),
    TraceRule("torch.testing", E, "test helpers compare on the host"),
    TraceRule("torch.utils.data", E, "data loading runs eagerly"),
    TraceRule("torch.overrides", I, "__torch_function__ dispatch helpers"),
    TraceRule("torch.utils._python_dispatch", I, "tensor-subclass dispatch helpers"),
    TraceRule("torch.utils._typing_utils", I, "typing helpers"),
    TraceRule("torch.utils.dlpack", G, "a tensor from a DLPack capsule"),
    TraceRule("torch.utils.set_module", E, "changes a function's module at definition time"),
    TraceRule("torch.__future__", F, "process-wide settings, fixed while capturing"),
    TraceRule("torch._utils_internal", E, "build and process environment"),
    TraceRule("torch._environment", F, "fixed for the process"),
    TraceRule("torch._sources", E, "reads source files"),
    TraceRule("torch._tensor_str", E, "printing options are global state"),
    TraceRule("torch.amp", I, "autocast helpers"),
)

#: Torch's Python that no rule names: traced.
DEFAULT = TraceRule("torch", Rule.INLINE, "torch's own Python")
#: ...except in torch's private packages no rule names (``torch._<name>``: compiler and runtime machinery).
PRIVATE = TraceRule("torch._", Rule.EAGER, "is torch's internal machinery (no trace rule says it is traced)")

#: The standard library's families modelled or traced (``dynacap.models``): each file's ``MODELS``
#: (dotted name -> (model, why)) and ``TRACED`` (dotted name -> why its pure Python is traced).
STDLIB_FAMILIES = (iteration, collection_models, copying, operators, functools_models, dataclass_models, strings,
                   class_factories)

#: Standard-library functions traced like user code although their files are skipped, or modelled:
#: met in models' own code (``typing.cast`` in library helpers) and in the families above.
LIBRARY_FUNCTIONS = (
    TraceRule("typing.cast", I, "pure Python: returns its value"),
    TraceRule("typing.get_origin", I, "pure Python"),
    TraceRule("typing.get_args", I, "pure Python"),
    TraceRule("typing._should_unflatten_callable_args", I, "pure Python"),
    *(TraceRule(name, I, why) for family in STDLIB_FAMILIES for name, why in getattr(family, "TRACED", {}).items()),
    *(TraceRule(name, M, why, (model, _never_eager))
      for family in STDLIB_FAMILIES for name, (model, why) in family.MODELS.items()),
)

_RULES = {r.name: r for r in _TABLE + LIBRARY_FUNCTIONS}

#: C functions whose module and name are not their public ones (pybind11 names them), by identity.
_BY_OBJECT = {
    torch._C._get_tracing_state: TraceRule("torch._C._get_tracing_state", Rule.COMPILER,
                                           "never inside torch.jit.trace while dynacap captures", None),
}

_TORCH_DIR = os.path.dirname(os.path.abspath(torch.__file__)) + os.sep
_MODELS_DIR = os.path.dirname(os.path.abspath(checkpointing.__file__)) + os.sep
_STDLIB_DIR = os.path.abspath(sysconfig.get_paths()["stdlib"]) + os.sep


def module_of_file(filename: str) -> str | None:
    """The dotted module a torch or standard-library file defines (``torch.optim.adam``), or None.

    A frozen standard-library module (``<frozen _collections_abc>``, ``<frozen os>``) is named by its filename.
    """
    if filename.startswith("<frozen ") and filename.endswith(">"):
        return filename[len("<frozen "):-1]
    path = os.path.abspath(filename)
    if path.startswith(_MODELS_DIR):
        return None
    if path.startswith(_TORCH_DIR):
        base = "torch"
        rel = path[len(_TORCH_DIR):]
    elif path.startswith(_STDLIB_DIR) and "site-packages" not in path:
        base = ""
        rel = path[len(_STDLIB_DIR):]
    else:
        return None
    rel = rel[:-3] if rel.endswith(".py") else rel
    if base and rel == "__init__":
        # torch's own __init__ keeps its name, so that its rule does not cover every submodule.
        return "torch.__init__"
    parts = [p for p in rel.split(os.sep) if p and p != "__init__"]
    return ".".join(([base] if base else []) + parts)


def name_of_code(code) -> str | None:
    """A code object's dotted name: its file's module and its qualified name; None for user code."""
    module = module_of_file(code.co_filename)
    return None if module is None else f"{module}.{code.co_qualname}"


def lookup(name: str) -> TraceRule | None:
    """The rule of the longest prefix of ``name`` (by dotted parts) in the table, or None.

    A ``MODEL`` rule names one function only: the code nested in the real one (its closures, such as the
    generic function ``singledispatch`` returns) is not what the model stands for.
    """
    full = name
    while name:
        rule = _RULES.get(name)
        if rule is not None and not (rule.rule is Rule.MODEL and name != full):
            return rule
        name = name.rpartition(".")[0]
    return None


#: (filename, qualified name) -> the rule of code there: the table is fixed, and an absolute filename names one
#: module whatever the working directory (a relative one is looked up each time).
_RULE_OF_CODE: dict[tuple[str, str], "TraceRule | None"] = {}


def rule_for_code(code) -> TraceRule | None:
    """What calling torch or library Python with this code becomes; None for user code.

    Library code outside torch with no rule is None too (skipped: see ``dynacap.skipfiles``).
    """
    key = (code.co_filename, code.co_qualname)
    try:
        return _RULE_OF_CODE[key]
    except KeyError:
        pass
    rule = _rule_of_name(name_of_code(code))
    if os.path.isabs(key[0]) or key[0].startswith("<frozen "):
        _RULE_OF_CODE[key] = rule
    return rule


def _rule_of_name(name: str | None) -> TraceRule | None:
    if name is None:
        return None
    rule = lookup(name)
    if rule is None and name.startswith("torch."):
        return PRIVATE if name.startswith("torch._") else DEFAULT
    return rule


def rule_for_object(obj, default_module: str | None = "torch") -> TraceRule | None:
    """The rule for an object reached as a value (a C function, a class), by its module and name.

    ``default_module`` names the module of C functions that do not say (torch's own).
    """
    code = getattr(obj, "__code__", None)
    if isinstance(code, types.CodeType):  # ``types.FunctionType.__code__`` is a descriptor
        return rule_for_code(code)
    try:
        by_object = _BY_OBJECT.get(obj)
    except TypeError:  # unhashable
        by_object = None
    if by_object is not None:
        return by_object
    owner = getattr(obj, "__self__", None)
    module = getattr(obj, "__module__", None) or (owner.__module__ if isinstance(owner, type) else default_module)
    if module is None:
        return None
    name = getattr(obj, "__qualname__", None) or getattr(obj, "__name__", None)
    if not isinstance(module, str) or not isinstance(name, str):
        return None
    # torch's C functions are methods of a hidden class: ``torch._foreach_add_`` by its public name.
    name = name.removeprefix("_VariableFunctionsClass.")
    return _RULES.get(f"{module}.{name}")
