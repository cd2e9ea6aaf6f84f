"""Fake propagation in a static trace, with what it learnt: results made again from recorded metadata.

A trace meets the same operation on the same metadata many times (the blocks of a model repeat).
``Propagation`` keys each call by its arguments' metadata, the constants and the modes
(``_metadata_key``) and remembers what the first dispatch gave: a fresh result (made again with
``_remake``), one of the arguments returned (in place, ``dropout`` in eval mode), or a view of the
first argument (taken from the view operation's own kernel on the meta storage, ``_view_of``);
``results.RESULT_RULES`` answer some operations before any dispatch.  It must not build graph
nodes (``builder.GraphBuilder`` does) and never answers where the recorded outcome could differ:
an argument needing grad, a value held by a fake, a changed argument, autocast or a torch-function mode.
"""
from __future__ import annotations

import torch
from torch._subclasses.fake_tensor import FakeTensor, in_kernel_invocation_manager

from .effects import storage_of
from .fakes import make_view, new_fake, new_meta
from .layouts import storage_length
from .results import MULTIPLE_VIEWS, RESULT_RULES, RETURNS_FIRST_ARGUMENT, VIEW_OPERATIONS


class Propagation:
    """The fake result of each call of one trace, in its fake mode; ``faking(fn, ...)`` runs ``fn`` in it."""

    def __init__(self, fake_mode, faking):
        self.fake_mode = fake_mode
        self._faking = faking
        #: (target, metadata of the arguments, modes) -> metadata of a fresh result (``propagate``).
        self._results: dict = {}
        #: The same key -> (index among the argument tensors of the one returned, whether its version
        #: went up): an operation returning one of its arguments (in place, ``dropout`` in eval mode).
        self._returns: dict = {}
        #: The same key -> (sizes, strides, offset) of a view of the first argument (``_view_of``).
        self._views: dict = {}

    def propagate(self, kind: str, target, fake_args: list, fake_kwargs: dict):
        """The fake result of a function or method call in a static trace.

        A trace meets the same operation on the same metadata many times (the blocks of a model
        repeat): a fresh result (a new tensor that is no view, needs no grad and leaves its
        arguments unchanged) is a function of the arguments' metadata, the constants and the
        modes, so later calls make a tensor of the recorded metadata instead of dispatching the
        operation (a layer norm or a batch norm is a dozen fake dispatches).
        """
        tensors: list = []
        key = _metadata_key((target, fake_args, fake_kwargs), tensors)
        if key is not None and not (torch._C._is_any_autocast_enabled() or torch._C._len_torch_function_stack()):
            key = (key, torch.is_grad_enabled(), torch.get_default_dtype(), torch.is_inference_mode_enabled())
            known = self._results.get(key)
            if known is None and target in RESULT_RULES:
                known = RESULT_RULES[target](fake_args, fake_kwargs)
                if known is not None:
                    self._results[key] = known
            if known is not None:
                return self._faking(self._remake, *known)
            returned = self._returns.get(key)
            if returned is None and target in RETURNS_FIRST_ARGUMENT and RETURNS_FIRST_ARGUMENT[target](fake_args,
                                                                                                     fake_kwargs):
                returned = self._returns[key] = (0, True)
            if returned is not None:
                index, bumped = returned
                fake = tensors[index]
                if bumped:  # what the in-place kernel's dispatch does (views share the counter)
                    torch._C._autograd._unsafe_set_version_counter((fake,), (fake._version + 1,))
                return fake
            if target in VIEW_OPERATIONS:
                view = self._views.get(key)
                if view is None:
                    view = self._view_of(kind, target, fake_args, fake_kwargs)
                    if view is not None:
                        self._views[key] = view
                if type(view) is list:
                    return tuple(self._faking(make_view, self.fake_mode, fake_args[0], *v) for v in view)
                if view is not None:
                    return self._faking(make_view, self.fake_mode, fake_args[0], *view)
        else:
            key = None
        before = _states(tensors) if key is not None else None
        if kind == "call_function":
            call = target
        else:
            call, fake_args = getattr(fake_args[0], target), fake_args[1:]
        fake = self._faking(call, *fake_args, **fake_kwargs)
        if key is not None and type(fake) is FakeTensor:
            after = _states(tensors)
            made = _fresh(fake, tensors) if before == after else None
            if made is not None:
                self._results[key] = made
            else:
                returned = _returned_argument(fake, tensors, key[0], before, after)
                if returned is not None:
                    self._returns[key] = returned
        return fake

    def _view_of(self, kind: str, target, fake_args: list, fake_kwargs: dict):
        """``(sizes, strides, offset)`` of the view of ``fake_args[0]`` a view operation returns (a list of
        them for a tuple of views), from its kernel run on the fake's meta storage (as fake propagation
        runs it, less the Python decompositions); None when that is no new view of the argument with its
        dtype (``reshape`` copying, ``flatten`` of a 1-d tensor returning it), the operation raises, or
        autograd would record it (its ``grad_fn``)."""
        x = fake_args[0] if fake_args else None
        if (type(x) is not FakeTensor or x.fake_mode is not self.fake_mode or x.layout is not torch.strided
                or x.constant is not None or 0 in x.shape or x.is_conj() or x.is_neg()
                or (torch.is_grad_enabled() and (x.requires_grad or target in MULTIPLE_VIEWS))):
            return None
        call = target if kind == "call_function" else getattr(torch.Tensor, target)
        try:
            with in_kernel_invocation_manager(self.fake_mode):
                out = call(*fake_args, **fake_kwargs)
        except Exception:  # dispatching raises it, with fake propagation's message
            return None
        base = x._base if x._is_view() else x
        views = list(out) if type(out) is tuple and target in MULTIPLE_VIEWS else [out]
        if not views or any(type(v) is not torch.Tensor or not v._is_view() or v._base is not base
                            or v.dtype != x.dtype for v in views):
            return None
        made = [(tuple(v.shape), v.stride(), v.storage_offset()) for v in views]
        return made if type(out) is tuple else made[0]

    def _remake(self, shape, stride, dtype, device, view) -> FakeTensor:
        """A new fake of the metadata ``_fresh`` recorded: a view (``view``: its offset) of a new base
        when the operation's result was one."""
        if view is not None:
            return make_view(self.fake_mode, self._remake(*view[1:], None), shape, stride, view[0])
        return new_fake(self.fake_mode, new_meta(shape, stride, dtype), device)


#: Constant argument types whose value (with the type: ``1``, ``1.0`` and ``True`` differ) may go in a key.
_KEY_ATOMS = frozenset({int, float, bool, complex, str, bytes, type(None), type(Ellipsis), torch.dtype,
                        torch.device, torch.layout, torch.memory_format})


def _metadata_key(args, tensors: list):
    """A hashable key for nested fake arguments and constants, or None when something is no plain
    fake or constant (a symbol, an unhashable object, a fake holding a value); appends the fakes
    to ``tensors``."""
    t = type(args)
    if t is FakeTensor:
        if args.layout is not torch.strided or args.constant is not None or args.is_complex():
            return None
        tensors.append(args)
        return (args.shape, args.stride(), args.storage_offset(), args.dtype, args.device, args.requires_grad)
    if t in _KEY_ATOMS:
        return (t, args)
    if t is tuple or t is list or t is torch.Size:
        parts = []
        for a in args:
            k = _metadata_key(a, tensors)
            if k is None:
                return None
            parts.append(k)
        return (t, *parts)
    if t is dict:
        parts = []
        for name, a in args.items():
            k = _metadata_key(a, tensors)
            if k is None or type(name) is not str:
                return None
            parts.append((name, k))
        return (dict, *parts)
    if _is_library_op(args):
        return args  # the operation itself
    return None


def _is_library_op(fn) -> bool:
    """Whether ``fn`` is torch's or ``operator``'s (its result a function of its arguments' metadata on
    fakes); a function the user allowed in the graph may read anything."""
    module = getattr(fn, "__module__", None) or ""
    return callable(fn) and (module == "torch" or module.startswith("torch.") or module == "_operator")


def _fresh(fake, tensors: list):
    """The metadata to make ``fake`` again (``Propagation._remake``) if it is a new tensor: no grad, no
    value held, its storage new (shared with no argument), dense, or a view of such a base; else None."""
    if fake.requires_grad or fake.constant is not None or fake.layout is not torch.strided or fake.is_complex():
        return None
    if fake._is_view():
        base = fake._base
        made = (_fresh(base, tensors) if type(base) is FakeTensor and not base._is_view()
                and base.dtype == fake.dtype else None)
        if made is None:
            return None
        return (fake.shape, fake.stride(), fake.dtype, fake.device, (fake.storage_offset(), *made[:4]))
    if fake.storage_offset():
        return None
    storage = fake.untyped_storage()
    if storage.nbytes() != storage_length(fake.shape, fake.stride()) * fake.element_size():
        return None  # not the storage ``empty_strided`` would make
    if any(t is fake or storage_of(t) == storage._cdata for t in tensors):
        return None
    return (fake.shape, fake.stride(), fake.dtype, fake.device, None)


def _states(tensors: list) -> list:
    """What an operation may change of its argument tensors without changing their metadata: version
    and storage (``set_``)."""
    return [(t._version, storage_of(t)) for t in tensors]


def _returned_argument(fake, tensors: list, key, before: list, after: list):
    """``(i, bumped)`` when ``fake`` is argument tensor ``i`` with the metadata it had (no in-place view
    op such as ``t_``) and its storage, its version up by one (``bumped``: an in-place kernel) or
    unchanged, and no other argument changed; else None.

    Only then does a later call on the same key return that argument as this one did: the key holds
    each argument's sizes, strides, offset, dtype, device and requires_grad, and what else an in-place
    kernel's outcome depends on is excluded (recording gradients: a leaf that needs grad refuses
    in-place writes; inference tensors)."""
    index = next((i for i, t in enumerate(tensors) if t is fake), None)
    if (index is None or (torch.is_grad_enabled() and any(t.requires_grad for t in tensors))
            or any(t.is_inference() for t in tensors)):
        return None
    (version, storage), (new_version, new_storage) = before[index], after[index]
    if (new_version - version not in (0, 1) or new_storage != storage
            or any(a != b for i, (a, b) in enumerate(zip(before, after)) if i != index)
            or _metadata_key(fake, []) != _tensor_keys(key)[index]):
        return None
    return index, new_version != version


def _tensor_keys(key) -> list:
    """The entries ``_metadata_key`` made for tensors in ``key``, in the order it listed the tensors
    (only a tensor's entry starts with a ``torch.Size`` object: the others start with a type or a name)."""
    out = []

    def walk(k):
        if type(k) is tuple and k:
            if type(k[0]) is torch.Size:
                out.append(k)
            else:
                for part in k:
                    walk(part)

    walk(key)
    return out
