"""The trace's fake mode, and views of fake tensors made without running fake dispatch's Python.

Fake propagation makes many results again from metadata it recorded (``Propagation.propagate``).
A new tensor is made directly: ``empty_strided`` on the meta device wrapped as a ``FakeTensor``, what
the mode's dispatch cache does on a hit.  A view cannot be: autograd attaches its view tracking
(``_base``, the version counter it shares with its base) around the dispatch of a view operation, so
it must come out of a call.  ``make_view`` makes that call (``as_strided``) and ``TraceFakeMode``
answers it with the view made as the dispatch cache makes a view operation's result, instead of the
cache's key hashing and checks (a few hundred µs per call, on every view a model's blocks repeat).
This module decides nothing about what a result is: the builder does.
"""
from __future__ import annotations

import torch
from torch._subclasses.fake_tensor import (
    _DISPATCH_META_HANDLERS,
    FakeTensor,
    FakeTensorConfig,
    FakeTensorMode,
    SymNumberMemoDescriptor,
)

_AS_STRIDED = torch.ops.aten.as_strided.default
#: Operators without tensor arguments that answer a question about torch's build (the convolution
#: backend choice asks one per new shape): run as they are, as fake dispatch would after its cache lookup.
_BUILD_QUERIES = frozenset({torch.ops.aten._nnpack_available.default})


class TraceFakeMode(FakeTensorMode):
    """A ``FakeTensorMode`` that returns the result ``make_view`` prepared for its one ``as_strided`` call,
    and answers metadata queries (``prim.device``: C++ asks it of a fake several times per operation) with
    the handlers ``FakeTensorMode.dispatch`` answers them with first, and build queries by running them,
    without its wrappers."""

    #: (the tensor viewed, its view's fake) while ``make_view`` calls ``as_strided``, else None.
    _prepared = None

    @classmethod
    def _should_skip_dynamo(cls) -> bool:
        return False  # the inherited ``__torch_dispatch__`` is already wrapped (once is enough)

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        handler = _DISPATCH_META_HANDLERS.get(func)
        if handler is not None:
            return handler(args)
        if func in _BUILD_QUERIES and not args and not kwargs:
            return func()
        prepared = self._prepared
        if prepared is not None and func is _AS_STRIDED and args and args[0] is prepared[0]:
            self._prepared = None
            return prepared[1]
        return super().__torch_dispatch__(func, types, args, {} if kwargs is None else kwargs)


#: What ``FakeTensor.__new__`` sets on a fake that holds nothing (no constant, no real tensor, no pytype or
#: dispatch keys) besides its mode and device: each memo of a number read from it, empty.
_EMPTY_STATE = {"constant": None, "pytype": None, "dispatch_keys": None, "real_tensor": None,
                **{f"_{name}{part}": None for name, value in vars(FakeTensor).items()
                   if isinstance(value, SymNumberMemoDescriptor) for part in ("", "_vc", "_epoch")}}


def new_fake(mode: FakeTensorMode, meta: torch.Tensor, device: torch.device) -> FakeTensor:
    """``FakeTensor(mode, meta, device)`` for a new meta tensor, less the constructor's argument checking and
    its memo descriptors (two thirds of its cost, paid for each of a model's parameters and results):
    the same subclass wrapping, dispatch keys, data-pointer policy and attributes."""
    if device.type == "meta" or device.index is None and device.type != "cpu" or FakeTensorConfig.debug:
        return FakeTensor(mode, meta, device)  # the constructor's own checks and normalization
    fake = torch.Tensor._make_subclass(FakeTensor, meta, meta.requires_grad, dispatch_device=True,
                                       device_for_backend_keys=device)
    if mode._allow_unsafe_data_ptr_access:
        torch._C._set_warn_deprecated_on_mutable_data_ptr(fake)
    else:
        torch._C._set_throw_on_mutable_data_ptr(fake)
    fake.__dict__.update(_EMPTY_STATE, _fake_device=device, fake_mode=mode)
    return fake


def new_meta(shape, stride, dtype: torch.dtype, requires_grad: bool = False) -> torch.Tensor:
    """A plain meta tensor of these sizes and strides, made with torch-dispatch modes off (under the trace's
    fake mode a factory call would make a fake; fake dispatch's own kernel-invocation context, needed to
    run kernels on fakes, costs several times more)."""
    with torch._C._DisableTorchDispatch():
        return torch.empty_strided(shape, stride, dtype=dtype, device="meta", requires_grad=requires_grad)


def make_view(mode: TraceFakeMode, x: FakeTensor, shape, stride, offset: int) -> FakeTensor:
    """``x.as_strided(shape, stride, offset)`` of a fake ``x`` of ``mode`` that autograd does not record:
    the dispatch returns a fake over ``x``'s storage made as ``FakeTensorMode`` makes a cached view
    operation's result (``_get_output_tensor_from_cache_entry``), and autograd makes it a view of ``x``'s
    base as for any view operation."""
    if type(mode) is not TraceFakeMode or x.fake_mode is not mode:
        return x.as_strided(shape, stride, offset)
    meta = new_meta(shape, stride, x.dtype)
    with torch._C._DisableTorchDispatch():
        meta.set_(x.untyped_storage(), offset, shape, stride)
    mode._prepared = (x, new_fake(mode, meta, x.device))
    try:
        return x.as_strided(shape, stride, offset)
    finally:
        mode._prepared = None
