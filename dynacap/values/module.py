"""``ModuleValue``: an ``nn.Module`` instance reached from the frame.

Children, parameters and buffers are read from the module's own dicts (so
guards never go through ``__getattr__``) and guarded by identity.
Built-in ``torch.nn`` layers have their ``forward`` inlined speculatively
(falling back to one ``call_module`` node); user modules and containers are
inlined by calling their ``forward`` through the tracer.  Forward pre-hooks
and forward hooks are traced around the forward in ``Module.__call__``'s
order; backward hooks and global module hooks are graph breaks.
"""
from __future__ import annotations

import inspect

import torch

from ..errors import GraphBreak
from ..skipfiles import is_layer_file
from ..source import AttrSource, DictEntrySource, ItemSource
from . import wrap as wrapping  # wrap imports this module: its functions are looked up when called
from .base import DELETED, Value, constant_args
from .constant import ConstantValue
from .containers import DictValue, TupleValue
from .functions import BoundMethodValue, UserFunctionValue
from .module_tree import ModuleTreeMethodValue, is_tree_method
from .objects import guard_class_attribute

_CONTAINERS = (torch.nn.Sequential, torch.nn.ModuleList, torch.nn.ModuleDict, torch.nn.ParameterList,
               torch.nn.ParameterDict)


def is_builtin_layer(module: torch.nn.Module) -> bool:
    """A ``torch.nn`` layer (Linear, Conv2d, ReLU...), or a user subclass that keeps its ``forward``.

    Its forward is inlined speculatively, else it is one ``call_module`` node.
    """
    if isinstance(module, _CONTAINERS):
        return False
    cls = type(module)
    if cls.__module__.startswith("torch.nn."):
        return True
    forward = getattr(cls.forward, "__code__", None)
    return forward is not None and is_layer_file(forward.co_filename) and "forward" not in module.__dict__


class ModuleValue(Value):
    def __init__(self, module: torch.nn.Module, source=None, made: tuple | None = None):
        self.module = module
        self.source = source
        #: For a layer created while tracing: ``(class, args, kwargs)`` (constants) to create it at run time.
        self.made = made
        #: False when only the type and the module's state are guarded (see ``guard_stateless``):
        #: the runtime module may be another instance, as for modules made anew on each call.
        self.identity_known = True

    def describe(self):
        where = f" {self.source.expr()}" if self.source is not None else ""
        return f"module {type(self.module).__name__}{where}"

    def python_type(self):
        return type(self.module)

    def real_object(self):
        if not self.identity_known:
            raise GraphBreak(f"{self.describe()} is a different object on each call (only its type is guarded)")
        return self.module

    def reconstruct(self, cg) -> None:
        if self.made is None or self.source is not None:
            super().reconstruct(cg)
            return
        # A new module on every run, one per traced creation however many places hold it.
        cg.build_once(self, self._build)

    def _build(self, cg) -> None:
        """``cls(*args, **kwargs)`` with the constant arguments it was made with while tracing."""
        cls, args, kwargs = self.made
        cg.append("PUSH_NULL")
        cg.load_const(cls)
        for a in args:
            cg.load_const(a)
        for v in kwargs.values():
            cg.load_const(v)
        if kwargs:
            cg.append("KW_NAMES", tuple(kwargs))
        cg.append("PRECALL", len(args) + len(kwargs))
        cg.append("CALL", len(args) + len(kwargs))

    def unspecialize(self, tx) -> "ModuleValue":
        """Guard the module by what it is made of, not by identity (it may be made anew on each call).

        Its type, the names of its parameters, buffers and children and the absence of hooks are
        guarded here; plain attributes through their own sources when read; parameters and buffers
        become graph inputs (guarded by metadata) and children are unspecialized in turn.
        """
        m, source = self.module, self.source
        tx.guards.type_match(source, m)
        if has_forward_hooks(m):
            _guard_hooked_state(tx, m, source)
            self.identity_known = False
            return self
        names = {kind: list(m.__dict__.get(kind, {})) for kind in ("_parameters", "_buffers", "_modules")}
        tx.guards.add("MODULE_STATE", source,
                      "list({s}._parameters) == {p} and list({s}._buffers) == {b} and list({s}._modules) == {c} "
                      "and not ({s}._forward_hooks or {s}._forward_pre_hooks or {s}._backward_hooks "
                      "or 'forward' in {s}.__dict__)",
                      (_structure_description, source, names),  # made when first read (``GuardSet.add``)
                      p=names["_parameters"], b=names["_buffers"], c=names["_modules"])
        _guard_no_hooks(tx, source, ("_backward_pre_hooks",))
        self.identity_known = False
        return self

    def _child_source(self, dict_attr, name):
        return DictEntrySource(self.source, dict_attr, name) if self.source is not None else None

    def getattr(self, tx, name):
        override = tx.attribute_override(self.module, name)
        if override is DELETED:
            raise GraphBreak(f"`.{name}` of {self.describe()} was deleted while capturing")
        if override is not None:
            return override
        m = self.module
        d = m.__dict__
        if name in d.get("_parameters", {}):
            param = d["_parameters"][name]
            source = self._child_source("_parameters", name)
            if param is None:
                return ConstantValue(None, source)
            if not self.identity_known:
                return wrapping.wrap(tx, param, source)
            return tx.module_tensor(param, f"{type(m).__name__}.{name}", source)
        if name in d.get("_buffers", {}):
            buf = d["_buffers"][name]
            source = self._child_source("_buffers", name)
            if buf is None:
                return ConstantValue(None, source)
            if not self.identity_known:
                return wrapping.wrap(tx, buf, source)
            return tx.module_tensor(buf, f"{type(m).__name__}.{name}", source)
        if name in d.get("_modules", {}):
            child = d["_modules"][name]
            source = self._child_source("_modules", name)
            if not self.identity_known and child is not None:
                return ModuleValue(child, source).unspecialize(tx)
            return wrapping.wrap(tx, child, source)
        if name in d:
            return wrapping.wrap(tx, d[name], AttrSource(self.source, name) if self.source is not None else None)
        if isinstance(m, torch.nn.ModuleDict) and name in ("keys", "values", "items") \
                and getattr(type(m), name) is getattr(torch.nn.ModuleDict, name):
            return ModuleDictMethodValue(self, name)
        if is_tree_method(m, name):
            return ModuleTreeMethodValue(self, name)
        static = inspect.getattr_static(m, name, None)
        if isinstance(static, property):
            guard_class_attribute(tx, self, m, name, static)
            return UserFunctionValue(static.fget).call(tx, [self], {})
        if inspect.isfunction(static):
            guard_class_attribute(tx, self, m, name, static)
            function = UserFunctionValue(static)
            # A built-in layer's helper (BatchNorm._check_input_dim) called from a user subclass.
            function.library_ok = True
            return BoundMethodValue(function, self)
        if isinstance(static, (staticmethod, classmethod)) and inspect.isfunction(static.__func__):
            guard_class_attribute(tx, self, m, name, static)
            function = UserFunctionValue(static.__func__)
            if isinstance(static, staticmethod):
                return function
            return BoundMethodValue(function, wrapping.wrap(tx, type(m), None))
        if isinstance(static, (staticmethod, classmethod)):
            raise GraphBreak(f"{type(static).__name__} `{name}` of {self.describe()}")
        if static is None and not hasattr(type(m), name):
            raise GraphBreak(f"{self.describe()} has no attribute {name!r} (AttributeError at run time)")
        return wrapping.wrap(tx, getattr(m, name), AttrSource(self.source, name) if self.source is not None else None)

    def call(self, tx, args, kwargs):
        m = self.module
        if m._backward_hooks or m._backward_pre_hooks or _global_hooks():
            raise GraphBreak(f"{self.describe()} has backward hooks (or global module hooks are installed); "
                             "it is called eagerly")
        if has_forward_hooks(m):
            return self._call_with_hooks(tx, args, kwargs)
        if self.source is not None and self.identity_known:
            # The structure guard of a shared module covers its hooks; one guarded by identity needs its own.
            _guard_no_hooks(tx, self.source, _HOOK_DICTS)
        return self._call_forward(tx, args, kwargs)

    def _call_with_hooks(self, tx, args: list, kwargs: dict) -> Value:
        """``Module._call_impl`` with forward pre-hooks and forward hooks: each traced in eager's order
        (pre-hooks may replace the arguments, hooks the result), around the forward."""
        m = self.module
        if self.source is None:
            raise GraphBreak(f"{self.describe()} has forward hooks and was not reached from the frame")
        if any(getattr(tx.ctx.containers.get(id(m.__dict__.get(kind))), "mutated", False)
               for kind in _FORWARD_HOOK_DICTS):
            raise GraphBreak(f"the forward hooks of {self.describe()} were changed in the captured code")
        # No hook's or forward's result is the CALL's result: a break inside one must not resume as if it were.
        tx.calling = False
        for hook_id, hook in list(m._forward_pre_hooks.items()):
            hook_value = wrapping.wrap(tx, hook, DictEntrySource(self.source, "_forward_pre_hooks", hook_id))
            if hook_id in m._forward_pre_hooks_with_kwargs:
                result = hook_value.call(tx, [self, TupleValue(list(args)), DictValue(dict(kwargs))], {})
                if not _is_none(result):
                    if not issubclass(result.python_type(), tuple) or len(result.iterate(tx)) != 2:
                        raise GraphBreak(f"a forward pre-hook of {self.describe()} returned {result.describe()} "
                                         "(RuntimeError at run time: None or (args, kwargs) is what it takes)")
                    new_args, new_kwargs = result.iterate(tx)
                    args, kwargs = list(new_args.iterate(tx)), _kwargs_of(tx, new_kwargs, self)
            else:
                result = hook_value.call(tx, [self, TupleValue(list(args))], {})
                if not _is_none(result):
                    args = list(result.iterate(tx)) if issubclass(result.python_type(), tuple) else [result]
        output = self._call_forward(tx, args, kwargs)
        for hook_id, hook in list(m._forward_hooks.items()):
            hook_value = wrapping.wrap(tx, hook, DictEntrySource(self.source, "_forward_hooks", hook_id))
            if hook_id in m._forward_hooks_with_kwargs:
                hook_args = [self, TupleValue(list(args)), DictValue(dict(kwargs)), output]
            else:
                hook_args = [self, TupleValue(list(args)), output]
            result = hook_value.call(tx, hook_args, {})
            if not _is_none(result):
                output = result
        return output

    def _call_forward(self, tx, args, kwargs):
        """What ``Module.__call__`` runs once its hooks are done: the forward."""
        m = self.module
        if isinstance(m, torch.nn.RNNBase) and args and is_builtin_layer(m):
            from .packed_sequences import call_recurrent, is_packed

            if is_packed(args[0]):
                return call_recurrent(tx, self, args, kwargs)
        if isinstance(m, torch.nn.RNNBase) and torch.is_grad_enabled():
            # AOTAutograd cannot trace the fused RNN kernels' backward (mkldnn_rnn_layer).
            raise GraphBreak(f"{self.describe()} runs eagerly while gradients are enabled (recurrent layers "
                             "are captured only under torch.no_grad)")
        if is_builtin_layer(m):
            # A recurrent layer's forward never inlines (its weights are read through weak references,
            # which backends renew): it is one node.
            inlined = None if isinstance(m, torch.nn.RNNBase) else _inline_layer(tx, self, args, kwargs)
            if inlined is not None:
                return inlined
            changed = _changed_attributes(tx, m)
            if changed:
                # The node runs the real layer, whose attributes take the trace's values only when the
                # graph's side effects are replayed, after it: eager's forward would see them already.
                raise GraphBreak(f"{self.describe()} is called after the captured code set its "
                                 f"{', '.join(f'`.{n}`' for n in changed)}: it runs eagerly")
            tx.guard_module_state(self)
            if self.source is not None:
                if not self.identity_known:  # the graph holds this very module
                    tx.guards.id_match(self.source, m)
                _guard_layer_tensors(tx, m, self.source)
            return tx.graph.call("call_module", m, args, kwargs, f"{type(m).__name__}")
        if "forward" in m.__dict__:
            # An instance attribute `forward` is what Module.__call__ runs.
            source = AttrSource(self.source, "forward") if self.source is not None else None
            return wrapping.wrap(tx, m.__dict__["forward"], source).call(tx, args, kwargs)
        forward = type(m).forward
        guard_class_attribute(tx, self, m, "forward", forward)
        if isinstance(m, torch.nn.Sequential) and forward is torch.nn.Sequential.forward:
            # torch's own Sequential.forward is not inlined (torch's files are skipped): run its loop here.
            if len(args) != 1 or kwargs:
                raise GraphBreak(f"{self.describe()} called with {len(args)} arguments (TypeError at run time)")
            return run_sequential(tx, self.iterate(tx), args[0])
        if not inspect.isfunction(forward):
            raise GraphBreak(f"{self.describe()} has no Python forward")
        return UserFunctionValue(forward).call(tx, [self, *args], kwargs)

    def iterate(self, tx):
        m = self.module
        if isinstance(m, (torch.nn.Sequential, torch.nn.ModuleList, torch.nn.ModuleDict)):
            self.guard_children(tx)
        if isinstance(m, (torch.nn.Sequential, torch.nn.ModuleList)):
            return [self.getattr(tx, name) for name in m._modules]
        if isinstance(m, torch.nn.ModuleDict):
            return [ConstantValue(k) for k in m._modules]
        if type(m).__iter__ is torch.nn.ParameterList.__iter__:
            self.guard_parameter_names(tx)
            return [self.getattr(tx, name) for name in m._parameters]
        raise GraphBreak(f"iterating over {self.describe()}")

    def length(self, tx) -> Value:
        """``len(module)``: containers by their children or parameters; a class's own ``__len__`` traced."""
        m = self.module
        length = getattr(type(m), "__len__", None)
        if length in (torch.nn.Sequential.__len__, torch.nn.ModuleList.__len__, torch.nn.ModuleDict.__len__):
            self.guard_children(tx)
            return ConstantValue(len(m._modules))
        if length in (torch.nn.ParameterList.__len__, torch.nn.ParameterDict.__len__):
            self.guard_parameter_names(tx)
            return ConstantValue(len(m._parameters))
        if inspect.isfunction(length):
            return self.getattr(tx, "__len__").call(tx, [], {})
        raise GraphBreak(f"len() of {self.describe()}")

    def truth(self, tx) -> bool:
        """``if self.bn:``: a module is true unless its class says otherwise (containers: when not empty)."""
        cls = type(self.module)
        if getattr(cls, "__bool__", None) is None:
            length = getattr(cls, "__len__", None)
            if length is None:
                return True
            if length in (torch.nn.Sequential.__len__, torch.nn.ModuleList.__len__, torch.nn.ModuleDict.__len__):
                self.guard_children(tx)
                return len(self.module._modules) > 0
            if length is torch.nn.ParameterList.__len__:
                self.guard_parameter_names(tx)
                return len(self.module._parameters) > 0
        raise GraphBreak(f"the truth value of {self.describe()} (its class defines __bool__ or __len__)")

    def guard_parameter_names(self, tx) -> None:
        """The names of the module's own parameters (a ParameterList iterates over exactly these)."""
        if self.source is not None:
            keys = list(self.module._parameters)
            tx.guards.add("EQUALS_MATCH", AttrSource(self.source, "_parameters"), "list({s}) == {keys}",
                          f"parameters of {self.source.expr()} == {keys}", keys=keys)

    def guard_children(self, tx) -> None:
        """The names of the children (a loop over a container unrolls over exactly these)."""
        if self.source is not None:
            keys = list(self.module._modules)
            tx.guards.add("EQUALS_MATCH", AttrSource(self.source, "_modules"), "list({s}) == {keys}",
                          f"children of {self.source.expr()} == {keys}", keys=keys)

    def getitem(self, tx, index):
        key = index.as_constant()
        m = self.module
        if type(m).__getitem__ in (torch.nn.ParameterList.__getitem__, torch.nn.ParameterDict.__getitem__):
            # Parameters stored by position ("0", "1"...) or by key.
            self.guard_parameter_names(tx)
            names = list(m._parameters)
            if isinstance(m, torch.nn.ParameterList):
                if type(key) is not int or not -len(names) <= key < len(names):
                    raise GraphBreak(f"indexing {self.describe()} with {key!r} (an int in range is what it takes)")
                return self.getattr(tx, names[key])
            if key not in names:
                raise GraphBreak(f"key {key!r} is not in {self.describe()} (KeyError at run time)")
            return self.getattr(tx, key)
        if isinstance(m, torch.nn.ModuleDict):
            return self.getattr(tx, key)
        if isinstance(m, (torch.nn.Sequential, torch.nn.ModuleList)):
            self.guard_children(tx)
            names = list(m._modules)
            if isinstance(key, slice):
                children = [self.getattr(tx, name) for name in names[key]]
                return ModuleSliceValue(children, type(m), ItemSource(self.source, key) if self.source else None)
            return self.getattr(tx, names[key])
        raise GraphBreak(f"indexing {self.describe()}")

    def setattr(self, tx, name, value):
        d = self.module.__dict__
        if name in d.get("_parameters", {}) or name in d.get("_modules", {}):
            raise GraphBreak(f"assigning a parameter or submodule `{name}` on {self.describe()}")
        if d.get("_buffers", {}).get(name) is not None and value.kind() == "tensor" \
                and value is self.getattr(tx, name):
            return  # ``self.count += 1``: the in-place result stored back into its own buffer changes nothing
        tx.record_setattr(self, name, value)


class ModuleDictMethodValue(Value):
    """``module_dict.keys`` / ``.values`` / ``.items`` (torch's own, not inlined): over the guarded children."""

    def __init__(self, owner: ModuleValue, name: str):
        self.owner = owner
        self.name = name

    def describe(self):
        return f"method .{self.name} of {self.owner.describe()}"

    def call(self, tx, args, kwargs):
        if args or kwargs:
            raise GraphBreak(f"{self.describe()} takes no arguments (TypeError at run time)")
        keys = self.owner.iterate(tx)  # guards the children's names
        if self.name == "keys":
            return TupleValue(keys)
        children = [self.owner.getattr(tx, k.as_constant()) for k in keys]
        if self.name == "values":
            return TupleValue(children)
        return TupleValue([TupleValue([k, c]) for k, c in zip(keys, children)])


def run_sequential(tx, children: list, value: Value) -> Value:
    """``nn.Sequential.forward``: feed ``value`` through each child in turn."""
    # No child's result is the CALL's result: a break inside one must not resume
    # as if it were (see Tracer.direct_call).
    tx.calling = False
    for child in children:
        value = child.call(tx, [value], {})
    return value


class ModuleSliceValue(TupleValue):
    """``container[a:b]`` of a ``ModuleList``/``Sequential``: a new container of the same type.

    At run time slicing makes a fresh module object each call, so it is kept
    symbolic (its children are the guarded ones) rather than read back.
    """

    def __init__(self, children: list, container_type: type, source=None):
        super().__init__(children, source)
        self.module_type = container_type

    def describe(self):
        return f"{self.module_type.__name__} slice of {len(self.items)}"

    def python_type(self):
        return self.module_type

    def getitem(self, tx, index):
        key = index.as_constant()
        if isinstance(key, slice):
            return ModuleSliceValue(self.items[key], self.module_type)
        return self.items[key]

    def call(self, tx, args, kwargs):
        if not issubclass(self.module_type, torch.nn.Sequential) or len(args) != 1 or kwargs:
            raise GraphBreak(f"calling {self.describe()}")
        return run_sequential(tx, self.items, args[0])

    def reconstruct(self, cg):
        if self.source is None:
            raise GraphBreak(f"{self.describe()} cannot be rebuilt after the graph")
        cg.extend(self.source.emit())


def is_stateless(m: torch.nn.Module) -> bool:
    """No parameters, buffers, children or hooks: the module is its type and its plain attributes."""
    return not (m._parameters or m._buffers or m._modules or m._forward_hooks or m._forward_pre_hooks
                or m._backward_hooks or m._backward_pre_hooks or "forward" in m.__dict__)


def create_layer(cls: type, args: list, kwargs: dict) -> "ModuleValue":
    """``nn.ReLU()``, ``nn.Softmax(dim=1)``... called in captured code: the layer, made at capture time.

    Only ``torch.nn`` layers with constant arguments that hold no parameters or buffers: such a
    layer is a pure function of its arguments, so one made now stands for the new one each call
    makes (and it is made again at run time if it leaves the graph).  Others break: their
    constructors draw random parameters.
    """
    if cls is torch.nn.Sequential and not kwargs and args and all(isinstance(a, ModuleValue) for a in args):
        return MadeSequentialValue.create(args)
    const = constant_args(args, kwargs)
    if const is None or not cls.__module__.startswith("torch.nn."):
        raise GraphBreak(f"creating a module ({cls.__name__}) inside the captured code")
    try:
        # Construct on the meta device first: a layer with parameters would draw random numbers.
        with torch.device("meta"):
            probe = cls(*const[0], **const[1])
        if not is_stateless(probe) or _global_hooks():
            raise GraphBreak(f"creating a module ({cls.__name__}) that holds parameters or buffers inside "
                             "the captured code")
        module = cls(*const[0], **const[1])
    except GraphBreak:
        raise
    except Exception as e:
        raise GraphBreak(f"creating a module ({cls.__name__}) raised {type(e).__name__}: {e}") from None
    return ModuleValue(module, None, made=(cls, tuple(const[0]), dict(const[1])))


def _inline_layer(tx, layer: ModuleValue, args, kwargs):
    """Inline a built-in layer's ``forward`` (``Linear`` becomes ``F.linear`` on its parameters).

    A flat graph of functional calls is cheaper to run than ``call_module``
    nodes (each one an ``nn.Module.__call__``).  This is speculative: if the
    forward hits anything not captured, the nodes it added are rolled back
    and the caller records the layer as one ``call_module`` node instead.
    Returns None in that case.
    """
    m = layer.module
    forward = type(m).forward
    if "forward" in m.__dict__ or not inspect.isfunction(forward):
        return None
    if len(args) == 1 and not kwargs and not _marked(forward) and (
            forward is _IDENTITY_FORWARD or forward is _DROPOUT_FORWARD and _returns_its_input(tx, layer, args[0])):
        # ``nn.Identity``, and ``nn.Dropout`` out of training, return their argument: what inlining the
        # forward gives, without a frame or a node (a transformer block holds half a dozen of each).
        tx.calling = False
        return args[0]
    ctx = tx.ctx
    nodes, effects, mutations = len(ctx.graph.created), len(ctx.side_effects), ctx.mutations
    grad = torch.is_grad_enabled()
    ctx.library_depth += 1
    try:
        return UserFunctionValue(forward).call(tx, [layer, *args], kwargs)
    except GraphBreak:
        if ctx.mutations != mutations:
            raise
        ctx.rollback(nodes, effects)
        torch._C._set_grad_enabled(grad)
        tx.calling = False
        return None
    finally:
        ctx.library_depth -= 1


_IDENTITY_FORWARD = torch.nn.Identity.forward
_DROPOUT_FORWARD = torch.nn.Dropout.forward
_F_DROPOUT = torch.nn.functional.dropout


def _returns_its_input(tx, layer: "ModuleValue", x: Value) -> bool:
    """Whether ``nn.Dropout``'s forward, ``F.dropout(input, self.p, self.training, self.inplace)``, returns
    ``x`` itself: torch's own ``F.dropout`` on a tensor without ``__torch_function__``, ``p`` in [0, 1]
    (else it raises) and not training (ATen's dropout then returns its input).  The attributes are read
    as the traced forward reads them, with the same guards; under export, which keeps no guards (and
    whose programs keep ``torch.export``'s dropout nodes), never."""
    from .tensor import TensorValue

    if (not tx.ctx.guards_kept or torch.nn.functional.dropout is not _F_DROPOUT or type(x) is not TensorValue
            or x.python_type() not in (torch.Tensor, torch.nn.Parameter)):
        return False
    p, training = layer.getattr(tx, "p"), layer.getattr(tx, "training")
    layer.getattr(tx, "inplace")
    if not (p.is_constant() and training.is_constant()):
        return False
    p, training = p.as_constant(), training.as_constant()
    return training is False and type(p) in (int, float) and 0.0 <= p <= 1.0


def _marked(fn) -> bool:
    """Whether the user marked ``fn`` (``dynacap.disable``, ``allow_in_graph``): the tracer's call decides then."""
    return getattr(fn, "_dynacap_disabled", False) or getattr(fn, "_dynacap_allow_in_graph", False)


def _changed_attributes(tx, m: torch.nn.Module) -> list[str]:
    """The attributes of ``m`` and its submodules that the trace assigned (``m.train()``, ``m.eps = ...``)."""
    ids = {id(sub) for sub in m.modules()}
    return sorted({name for (owner, name) in tx.ctx.attribute_overrides if owner in ids})


def _guard_layer_tensors(tx, m: torch.nn.Module, source) -> None:
    """A ``call_module`` layer's parameters and buffers (and its children's), by identity.

    Backends may capture a layer's tensors when they compile (AOTAutograd lifts them into
    graph inputs), so assigning a new ``Parameter`` to a layer must recompile.
    """
    for kind in ("_parameters", "_buffers"):
        for name, tensor in m.__dict__.get(kind, {}).items():
            entry = DictEntrySource(source, kind, name)
            if tensor is None:
                tx.guards.equals_match(entry, None)
            else:
                tx.guards.id_match(entry, tensor)
    for name, child in m.__dict__.get("_modules", {}).items():
        entry = DictEntrySource(source, "_modules", name)
        if child is None:
            tx.guards.equals_match(entry, None)
        else:
            tx.guards.id_match(entry, child)
            _guard_layer_tensors(tx, child, entry)


def _global_hooks() -> bool:
    from torch.nn.modules import module as module_impl

    return bool(module_impl._global_forward_hooks or module_impl._global_forward_pre_hooks
                or module_impl._global_backward_hooks or module_impl._global_backward_pre_hooks)


_HOOK_DICTS = ("_forward_pre_hooks", "_forward_hooks", "_backward_hooks", "_backward_pre_hooks")
_FORWARD_HOOK_DICTS = ("_forward_pre_hooks", "_forward_hooks", "_forward_pre_hooks_with_kwargs",
                       "_forward_hooks_with_kwargs")


def _guard_no_hooks(tx, source, kinds) -> None:
    for kind in kinds:
        tx.guards.add("MODULE_STATE", AttrSource(source, kind), "list({s}) == {keys}",
                      (_no_hooks_description, source, kind), keys=[])


def _structure_description(source, names: dict) -> str:
    return (f"{source.expr()} has parameters {names['_parameters']}, buffers {names['_buffers']}, "
            f"children {names['_modules']} and no hooks")


def _no_hooks_description(source, kind: str) -> str:
    return f"{source.expr()} has no {kind.strip('_').replace('_', ' ')}"


def has_forward_hooks(m: torch.nn.Module) -> bool:
    return bool(m._forward_hooks or m._forward_pre_hooks)


def _guard_hooked_state(tx, m: torch.nn.Module, source) -> None:
    """A module with forward hooks, shared by instances: its structure and which hooks it has (by id, in
    order; the hooks themselves are guarded through their sources when called) and no backward hooks."""
    for kind in ("_parameters", "_buffers", "_modules", "_forward_pre_hooks", "_forward_hooks",
                 "_forward_pre_hooks_with_kwargs", "_forward_hooks_with_kwargs", "_backward_hooks",
                 "_backward_pre_hooks"):
        keys = list(m.__dict__.get(kind, {}))
        tx.guards.add("MODULE_STATE", AttrSource(source, kind), "list({s}) == {keys}",
                      f"{kind.strip('_').replace('_', ' ')} of {source.expr()} == {keys}", keys=keys)
    tx.guards.add("MODULE_STATE", source, "'forward' not in {s}.__dict__",
                  f"{source.expr()} has no instance attribute 'forward'")


def _is_none(value: Value) -> bool:
    return value.is_constant() and value.as_constant() is None


def _kwargs_of(tx, value: Value, module: ModuleValue) -> dict:
    """The keyword arguments a forward pre-hook returned (a dict of names to values)."""
    if not isinstance(value, DictValue) or not all(type(k) is str for k in value.items):
        raise GraphBreak(f"a forward pre-hook of {module.describe()} returned keyword arguments as "
                         f"{value.describe()}")
    return dict(value.items)


class MadeSequentialValue(ModuleSliceValue):
    """``nn.Sequential(a, b)`` of modules, made in captured code: a container of the children's values.

    The container holds no state of its own, so making it changes nothing; calling it runs each
    child as ``Sequential.forward`` does (their own values, with their own guards).  When it leaves
    the graph it is made again from the children, one new object per run, as eager makes one.
    """

    @classmethod
    def create(cls, children: list) -> "MadeSequentialValue":
        from torch.nn.modules import module as module_impl

        if module_impl._global_module_registration_hooks:
            raise GraphBreak("creating a module (Sequential) inside the captured code while a global module "
                             "registration hook is installed (it would run)")
        return cls(list(children), torch.nn.Sequential)

    def describe(self):
        return f"Sequential of {len(self.items)} made in the captured code"

    def reconstruct(self, cg):
        cg.build_once(self, self._build)

    def _build(self, cg) -> None:
        cg.append("PUSH_NULL")
        cg.load_const(torch.nn.Sequential)
        for child in self.items:
            child.reconstruct(cg)
        cg.append("PRECALL", len(self.items))
        cg.append("CALL", len(self.items))

