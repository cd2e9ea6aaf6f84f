"""NumPy in captured code: arrays made from tensors are torch operations, NumPy on constants runs for real.

``x.numpy()`` of a traced tensor is an ``NDArrayValue`` backed by the tensor's
own node (no copy).  NumPy functions, ufuncs, methods, attributes and
operators on such arrays become graph nodes that run torch's NumPy on tensors
(``torch._numpy``), so the graph holds torch operations only; the array
becomes a real ``numpy.ndarray`` only where it leaves the graph (returned,
stored, live at a break), as ``.numpy()`` of the graph's output.  NumPy on
constants (``np.float32(2.0)``, ``np.sqrt(4.0)``) runs at capture time: its
scalars are constants, its arrays graph nodes whose values are also known
(``np.arange(3)`` iterated).  An array read from the frame is a graph input
through ``torch.from_numpy`` (``ArrayTensorSource``), guarded like a tensor.

Every operation is first run by NumPy itself on example arrays of the same
dtypes and shapes (ones): the result's type (array or NumPy scalar), dtype and
shape must be what torch's NumPy gives, or the operation is a graph break, so
promotion rules are NumPy's.  Must not: run NumPy randomness at capture time
(``np.random`` always runs eagerly: drawing while capturing would change the
program's results), run a NumPy function that writes memory or global state,
or pass a NumPy array to a torch operation (eager torch converts or refuses it, case by case).
"""
from __future__ import annotations

import operator
import types
import warnings
import weakref
from dataclasses import dataclass

import numpy as np
import torch
from bytecode import Instr
from torch.fx.graph import _register_custom_builtin

from ..errors import GraphBreak
from ..source import Source
from .base import Value, constant_args
from .constant import ConstantValue, is_literal
from .torch_ns import TorchValue

# NumPy scalars are node arguments (``x * np.float32(2.0)``); FX writes them as ``np.float32(2.0)``.
_register_custom_builtin("np", "import numpy as np", np)

#: torch dtypes that ``Tensor.numpy()`` accepts, and the NumPy dtype of the array it gives.
_NUMPY_DTYPE = {torch.float16: np.float16, torch.float32: np.float32, torch.float64: np.float64,
                torch.complex64: np.complex64, torch.complex128: np.complex128, torch.int8: np.int8,
                torch.int16: np.int16, torch.int32: np.int32, torch.int64: np.int64, torch.uint8: np.uint8,
                torch.bool: np.bool_}
_TORCH_DTYPE = {v: k for k, v in _NUMPY_DTYPE.items()}
_SCALAR_DTYPE_NAME = {t: np.dtype(t).name for t in _NUMPY_DTYPE.values()}
#: torch._numpy names not traced: they write into an argument or global state, or differ from NumPy's
#: (``ndarray(shape)``, ``empty``'s values), or are classes answered on constants.
_NOT_TRACED = {"copyto", "put", "fill_diagonal", "put_along_axis", "set_default_dtype", "from_dlpack", "ndarray",
               "DType", "AxisError", "UFuncTypeError", "finfo", "iinfo", "dtype", "random"}
#: Array methods that change the array in place.
_IN_PLACE_METHODS = {"fill", "sort", "put", "resize", "itemset", "setfield", "partition", "byteswap",
                     "setflags", "__setitem__", "__iadd__", "__isub__", "__imul__", "__itruediv__"}
#: Array methods that read its values into Python.
_DATA_METHODS = {"item": "`.item()`", "tolist": "`.tolist()`", "tobytes": "`.tobytes()`",
                 "__bool__": "`bool()`", "__float__": "`float()`", "__int__": "`int()`"}
_IN_PLACE_OPERATORS = {operator.iadd, operator.isub, operator.imul, operator.itruediv, operator.ifloordiv,
                       operator.imod, operator.ipow, operator.imatmul, operator.iand, operator.ior,
                       operator.ixor, operator.ilshift, operator.irshift}


def _module_of(obj) -> str:
    """The module a NumPy object belongs to, read without running any user code (``type(obj)`` first)."""
    t = type(obj)
    if issubclass(t, types.ModuleType):
        return obj.__name__
    if t is types.MethodType:  # ``np.random.rand``: a method of the global RandomState
        return type(obj.__self__).__module__
    if issubclass(t, type) or t in (types.FunctionType, types.BuiltinFunctionType) \
            or t.__name__ == "cython_function_or_method":
        return obj.__module__ or ""
    return t.__module__


def is_numpy_object(obj) -> bool:
    """Whether ``obj`` is NumPy's own: a module, function, ufunc, class, or a random generator and its methods."""
    t = type(obj)
    if t is np.ufunc or t is _DISPATCHER:
        return True
    module = _module_of(obj)
    if not (module == "numpy" or module.startswith("numpy.")):
        return False
    return t is not types.MethodType or _is_random(obj)


def _is_random(obj) -> bool:
    return _module_of(obj).startswith("numpy.random")


_DISPATCHER = type(np.sum)
#: Graphs (one per trace) in which an array of known values shared its memory with a tensor.
_SHARED_CONSTANTS: "weakref.WeakSet" = weakref.WeakSet()


def _random_break(what: str):
    return GraphBreak(f"{what}: NumPy randomness runs eagerly (drawing while capturing would change the "
                      "program's results); use torch's random functions to keep it in the graph")


class NumpyValue(Value):
    """The ``numpy`` module tree, its functions, ufuncs and scalar types (known by identity)."""

    def __init__(self, obj, source=None):
        self.obj = obj
        self.source = source

    def describe(self) -> str:
        if issubclass(type(self.obj), types.ModuleType):
            return f"module {self.obj.__name__}"
        parts = _module_of(self.obj).split(".")
        namespace = "numpy." + parts[1] if len(parts) > 1 and parts[1] in ("random", "fft", "linalg") else "numpy"
        return f"`{namespace}.{getattr(self.obj, '__name__', None) or type(self.obj).__name__}`"

    def real_object(self):
        return self.obj

    def python_type(self):
        return type(self.obj)

    def is_constant(self) -> bool:
        return issubclass(type(self.obj), type)  # a scalar type, as a dtype argument

    def as_constant(self):
        if self.is_constant():
            return self.obj
        return super().as_constant()

    def getattr(self, tx, name):
        from ..source import AttrSource
        from .wrap import wrap

        try:
            attr = getattr(self.obj, name)
        except AttributeError as e:
            raise GraphBreak(f"{self.describe()} has no attribute {name!r}") from e
        if _is_random(self.obj) and not issubclass(type(attr), types.ModuleType):
            return NumpyValue(attr)  # whatever it is, calling it draws
        return wrap(tx, attr, AttrSource(self.source, name) if self.source is not None else None)

    def call(self, tx, args, kwargs):
        fn = self.obj
        if _is_random(fn):
            raise _random_break(f"call to {self.describe()}")
        if issubclass(type(fn), types.ModuleType):
            raise GraphBreak(f"{self.describe()} is not callable")
        if fn is not np.asarray and fn is not np.array and _holds_tensor([*args, *kwargs.values()]):
            raise GraphBreak(f"{self.describe()} given a torch tensor runs eagerly (NumPy gives back an array or, "
                             "through the tensor's `__array_wrap__`, a tensor); pass `x.numpy()`")
        if fn is np.asarray and len(args) == 1 and not kwargs:
            from .tensor import TensorValue

            if isinstance(args[0], TensorValue):
                return tensor_numpy(tx, args[0], [], {})  # ``Tensor.__array__``: the same memory
            if isinstance(args[0], NDArrayValue) and args[0].scalar_type is None:
                return args[0]
        target = _tnp_functions().get(id(fn))
        if target is not None:
            return numpy_call(tx, target[1], fn, args, kwargs, self.describe())
        if type(fn) is np.ufunc or fn in _PURE_CLASSES or (isinstance(fn, type) and issubclass(fn, np.generic)):
            return numpy_call(tx, None, fn, args, kwargs, self.describe())
        raise GraphBreak(f"call to {self.describe()}, a NumPy function torch's NumPy does not implement; "
                         "it runs eagerly")


class NDArrayValue(Value):
    """A NumPy array (or NumPy scalar) whose data is a tensor of the graph."""

    def __init__(self, tensor, scalar_type: type | None = None, source: Source | None = None, constant=None):
        self.tensor = tensor
        #: For an array read from the frame: where it is (the tensor's source reads it through from_numpy).
        self.source = source
        #: ``np.float32`` etc. for a NumPy scalar (a 0-d tensor in the graph); None for an array.
        self.scalar_type = scalar_type
        #: For an array NumPy computed from constants (``np.arange(3)``): its values (see ``known``).
        self.constant = constant

    def known(self, tx):
        """The array's values when they are known at capture time: computed from constants, and its memory
        never shared with a tensor in this trace (an in-place tensor operation could change it)."""
        return self.constant if self.constant is not None and tx.graph not in _SHARED_CONSTANTS else None

    def kind(self) -> str:
        return "NumPy scalar" if self.scalar_type is not None else "NumPy array"

    def describe(self) -> str:
        fake = self.tensor.fake
        if self.scalar_type is not None:
            return f"a NumPy {self.scalar_type.__name__} computed from tensor data"
        return f"a NumPy array {np.dtype(_NUMPY_DTYPE[fake.dtype]).name}{list(fake.shape)}"

    def python_type(self):
        return self.scalar_type or np.ndarray

    def truth(self, tx) -> bool:
        known = self.known(tx)
        if known is None:
            raise GraphBreak(f"the truth value of {self.describe()} depends on tensor data")
        return _run_reference(bool, [known], {}, "`bool()` of a NumPy array")

    def getattr(self, tx, name):
        fake = self.tensor.fake
        if name == "__class__":
            return ConstantValue(self.python_type())
        if name == "shape":
            from .containers import TupleValue

            return TupleValue(self.tensor.sizes(tx).items)  # a tuple, as NumPy's; sizes may be symbolic
        if name in ("ndim", "size", "dtype", "itemsize", "nbytes"):
            if name in ("size", "nbytes") and not all(type(d) is int for d in fake.shape):
                raise GraphBreak(f"`.{name}` of {self.describe()} with dynamic shapes")
            return numpy_constant(getattr(_example(tx, self), name))
        if name in ("T", "real", "imag", "mT"):
            return numpy_call(tx, _ndarray_target(name, False), lambda a: getattr(a, name), [self], {},
                              f"`ndarray.{name}`")
        attr = getattr(self.python_type(), name, None)
        if attr is None:
            raise GraphBreak(f"{self.describe()} has no attribute {name!r}")
        if not callable(attr):
            raise GraphBreak(f"attribute `.{name}` of {self.describe()} is not captured")
        return NDArrayMethodValue(self, name)

    def getitem(self, tx, index):
        return numpy_call(tx, operator.getitem, operator.getitem, [self, index], {}, "`ndarray[...]`")

    def setitem(self, tx, index, value):
        raise GraphBreak(f"writing into {self.describe()} runs eagerly (it changes the tensor it shares memory with)")

    def length(self, tx=None) -> Value:
        """``len(array)``: its first dimension, as NumPy answers it (symbolic where it is, given ``tx``)."""
        shape = self.tensor.fake.shape
        if self.scalar_type is not None or not shape:
            raise GraphBreak(f"len() of {self.describe()} (TypeError at run time)")
        if type(shape[0]) is int:
            return ConstantValue(shape[0])
        if tx is None:
            raise GraphBreak(f"len() of {self.describe()} with a dynamic first dimension")
        return self.tensor.size_item(tx, 0)

    def iterate(self, tx):
        shape = self.tensor.fake.shape
        if self.scalar_type is not None or not shape:
            raise GraphBreak(f"iterating over {self.describe()} (TypeError at run time)")
        if type(shape[0]) is not int:
            raise GraphBreak(f"iterating over {self.describe()} with a dynamic first dimension")
        return [self.getitem(tx, ConstantValue(i)) for i in range(shape[0])]

    def reconstruct(self, cg) -> None:
        if self.source is not None:
            super().reconstruct(cg)  # the frame's own array, not a new one over the same memory
            return
        cg.build_once(self, self._build)

    def _build(self, cg) -> None:
        """``tensor.numpy()`` of the graph's output (``[()]`` of it for a NumPy scalar)."""
        cg.load_tensor(self.tensor)
        cg.append("LOAD_METHOD", "numpy")
        cg.append("PRECALL", 0)
        cg.append("CALL", 0)
        if self.scalar_type is not None:
            cg.load_const(())
            cg.append("BINARY_SUBSCR")


def tensor_of_array(obj):
    """The tensor sharing a frame NumPy array's memory; None where ``torch.from_numpy`` would refuse or warn."""
    if type(obj) is not np.ndarray or not obj.flags.writeable or obj.dtype.type not in _TORCH_DTYPE \
            or not obj.dtype.isnative or any(s < 0 or s % obj.itemsize for s in obj.strides):
        return None
    return torch.from_numpy(obj)


@dataclass(frozen=True)
class ArrayTensorSource(Source):
    """The tensor of a NumPy array read from the frame (``torch.from_numpy`` of it): a graph input."""

    base: Source

    def expr(self) -> str:
        return f"___tensor_of_array({self.base.expr()})"

    def load(self) -> list:
        return [Instr("PUSH_NULL"), Instr("LOAD_CONST", tensor_of_array), *self.base.emit(), Instr("PRECALL", 1),
                Instr("CALL", 1)]

    def root(self) -> Source:
        return self.base.root()

    def constants(self) -> dict:
        return {**self.base.constants(), "___tensor_of_array": tensor_of_array}


def array_from_frame(tx, array: np.ndarray, source: Source) -> Value:
    """A NumPy array read from the frame: its tensor (``torch.from_numpy``) a graph input guarded by dtype,
    shape and strides; the array itself is what the rewritten code passes on."""
    from torch._subclasses.fake_tensor import unset_fake_temporarily

    with unset_fake_temporarily():
        tensor = tensor_of_array(array)
    if tensor is None:
        raise GraphBreak(f"a NumPy array read from the frame ({source.expr()}) that torch.from_numpy cannot share "
                         f"(dtype {array.dtype}, read-only, or strides it cannot take)")
    tx.guards.type_match(source, array)
    tensor_source = ArrayTensorSource(source)
    choices = tx.ctx.shapes.tensor_dims(tensor_source.expr(), tensor) if tx.ctx.shapes is not None else None
    value = tx.graph.input_tensor(tensor_source, tensor, choices)
    tx.guards.tensor_match(tensor_source, tensor, value.fake)
    return NDArrayValue(value, source=source)


class NDArrayMethodValue(Value):
    """``array.method`` before the call."""

    def __init__(self, owner: NDArrayValue, name: str):
        self.owner = owner
        self.name = name

    def describe(self) -> str:
        return f"method ndarray.{self.name}"

    def call(self, tx, args, kwargs):
        name = self.name
        known = self.owner.known(tx)
        if known is not None and name in _DATA_METHODS:
            const = constant_args(args, kwargs)
            if const is not None:
                return numpy_constant(_run_reference(getattr(known, name), *const, f"`ndarray.{name}()`"))
        if name in _DATA_METHODS:
            raise GraphBreak(f"{_DATA_METHODS[name]} reads a NumPy array's values into Python; it runs eagerly")
        if name in _IN_PLACE_METHODS:
            raise GraphBreak(f"`ndarray.{name}()` changes the array in place; it runs eagerly")
        import torch._numpy as tnp

        if not callable(getattr(tnp.ndarray, name, None)):
            raise GraphBreak(f"`ndarray.{name}()` is not one torch's NumPy implements; it runs eagerly")
        return numpy_call(tx, _ndarray_target(name, True), lambda a, *rest, **kw: getattr(a, name)(*rest, **kw),
                          [self.owner, *args], kwargs, f"`ndarray.{name}()`")

    def reconstruct(self, cg) -> None:
        self.owner.reconstruct(cg)
        cg.append("LOAD_ATTR", self.name)


class TensorFromNumpyValue(TorchValue):
    """``torch.from_numpy`` / ``as_tensor`` / ``asarray`` / ``tensor``: of a NumPy array made from a tensor,
    a tensor of its node (a new tensor object sharing its memory, or a copy for ``torch.tensor``)."""

    def call(self, tx, args, kwargs):
        if not args or not isinstance(args[0], NDArrayValue):
            return super().call(tx, args, kwargs)
        array, fn, what = args[0], self.obj, f"torch.{self.obj.__name__}"
        if array.constant is not None:
            _SHARED_CONSTANTS.add(tx.graph)  # the tensor may change the memory the known values describe
        if len(args) > 1 or (fn is torch.from_numpy and kwargs):
            raise GraphBreak(f"{what} of a NumPy array with these arguments is not captured")
        if fn is torch.from_numpy and array.scalar_type is not None:
            raise GraphBreak(f"{what} of a NumPy scalar (TypeError at run time)")
        if fn is torch.tensor:
            if any(k != "dtype" for k in kwargs):
                raise GraphBreak(f"{what} of a NumPy array with these arguments is not captured")
            copy = tx.graph.call("call_function", torch.clone, [array.tensor], {}, what)
            return tx.graph.call("call_method", "to", [copy], kwargs, what) if kwargs else copy
        alias = tx.graph.call("call_function", torch.ops.aten.alias.default, [array.tensor], {}, what)
        return tx.graph.call("call_function", fn, [alias], kwargs, what) if kwargs else alias


def is_numpy_array(value: Value) -> bool:
    return isinstance(value, NDArrayValue)


def tensor_numpy(tx, tensor, args, kwargs) -> Value:
    """``tensor.numpy()``: the same node, seen as a NumPy array; a break where eager would raise."""
    force = kwargs.get("force")
    if args or any(k != "force" for k in kwargs) or not (force is None or force.is_constant()
                                                         and force.as_constant() is False):
        raise GraphBreak("`tensor.numpy(force=True)` is not captured")
    fake = tensor.fake
    if fake.requires_grad:
        raise GraphBreak("`.numpy()` of a tensor that requires grad (RuntimeError at run time; use "
                         ".detach().numpy())")
    if fake.device.type != "cpu":
        raise GraphBreak(f"`.numpy()` of a {fake.device.type} tensor (TypeError at run time; use .cpu() first)")
    if fake.dtype not in _NUMPY_DTYPE:
        raise GraphBreak(f"`.numpy()` of a {fake.dtype} tensor (NumPy has no such dtype)")
    if fake.is_conj() or fake.is_neg():
        raise GraphBreak("`.numpy()` of a tensor with its conjugate or negative bit set")
    return NDArrayValue(tensor)


def numpy_operator(tx, fn, operands: list, what: str) -> Value:
    """A Python operator with a NumPy array (made from a tensor) among its operands."""
    if fn in _IN_PLACE_OPERATORS:
        raise GraphBreak(f"in-place {what} on a NumPy array runs eagerly (it changes the tensor it shares "
                         "memory with)")
    if _holds_tensor(operands):
        # Eager gives a tensor (the NumPy value as a Python scalar or converted array) or a TypeError.
        raise GraphBreak(f"{what} between a torch tensor and a NumPy value runs eagerly; use torch.from_numpy "
                         "to keep it in the graph")
    return numpy_call(tx, fn, fn, operands, {}, what)


def numpy_call(tx, target, reference, args: list, kwargs: dict, what: str) -> Value:
    """``reference(*args, **kwargs)`` as NumPy computes it: on constants, for real; on arrays made from
    tensors, as a graph node running ``target`` (torch's NumPy) on the tensors.

    ``reference`` runs first, on examples of the arrays: what it returns (array or NumPy scalar, dtype,
    shape) is what the node's result must be.
    """
    if "out" in kwargs:
        raise GraphBreak(f"{what} with `out=` runs eagerly (it writes into an array)")
    example = _run_reference(reference, [_example(tx, a) for a in args],
                             {k: _example(tx, v) for k, v in kwargs.items()}, what)
    exact = not _holds_unknown(tx, [*args, *kwargs.values()])
    if exact and not _holds_ndarray(example):
        return numpy_constant(example, what)
    if target is None:
        raise GraphBreak(f"{what} is not one torch's NumPy implements; it runs eagerly")
    count = len(tx.graph.created)
    node_args = [_node_argument(a, what) for a in args]
    node_kwargs = {k: _node_argument(v, what) for k, v in kwargs.items()}
    result = tx.graph.call("call_function", _graph_target(target), node_args, node_kwargs, what.strip("`"))
    try:
        return _as_numpy(result, example, what, exact)
    except GraphBreak:
        tx.graph.rollback(count)
        raise


# -- what NumPy computes ----------------------------------------------------------------------------

def _holds(values, kind) -> bool:
    """Whether ``values`` (nested in tuples, lists, dicts) hold a value for which ``kind(value)`` is true."""
    from .containers import DictValue, SequenceValue

    return any(kind(v) or isinstance(v, SequenceValue) and _holds(v.items, kind)
               or isinstance(v, DictValue) and _holds(v.items.values(), kind) for v in values)


def _holds_tensor(values) -> bool:
    from .tensor import TensorValue

    return _holds(values, lambda v: isinstance(v, TensorValue))


def _holds_unknown(tx, values) -> bool:
    """Whether ``values`` hold a tensor or an array whose values are not known at capture time."""
    from .tensor import TensorValue

    return _holds(values, lambda v: isinstance(v, TensorValue) or isinstance(v, NDArrayValue) and v.known(tx) is None)


def _holds_ndarray(obj) -> bool:
    if type(obj) is np.ndarray:
        return True
    return type(obj) in (tuple, list) and any(_holds_ndarray(x) for x in obj)


def _example(tx, value: Value):
    """A real object standing for ``value`` in NumPy's own run: its values where known, else ones of the
    array's dtype and shape."""
    from .containers import SequenceValue
    from .tensor import TensorValue

    if isinstance(value, TensorValue):
        # NumPy turns a tensor argument into an array (``Tensor.__array__``), as ``.numpy()`` does.
        value = tensor_numpy(tx, value, [], {})
    if isinstance(value, NDArrayValue):
        if value.known(tx) is not None:
            return value.constant
        fake = value.tensor.fake
        dtype = _NUMPY_DTYPE[fake.dtype]
        if value.scalar_type is not None:
            return np.ones((), dtype)[()]
        # A dynamic size by the size seen now: what NumPy returns does not depend on sizes above 1.
        return np.ones(_hints(fake.shape), dtype)
    if isinstance(value, SequenceValue):
        items = [_example(tx, v) for v in value.items]
        return value.container_type(items) if value.container_type in (tuple, list) else tuple(items)
    if isinstance(value, (NumpyValue, ConstantValue)) or value.is_constant():
        return value.as_constant()
    raise GraphBreak(f"NumPy was given {value.describe()}, which is not captured")


def _hints(shape) -> tuple:
    """Sizes, dynamic ones by the size of this call (never guarded: nothing is decided on them)."""
    hints = tuple(d if type(d) is int else d.node.hint for d in shape)
    if None in hints:
        raise GraphBreak("NumPy on an array with a data-dependent size is not captured")
    return hints


def _run_reference(fn, args, kwargs, what):
    try:
        with np.errstate(all="ignore"), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return fn(*args, **kwargs)
    except Exception as e:
        raise GraphBreak(f"{what} raised {type(e).__name__} in NumPy ({str(e)[:120]}); it runs eagerly") from e


def numpy_constant(result, what: str = "NumPy") -> Value:
    """A NumPy result on constants as a capture-time constant (NumPy scalars, dtypes and literals)."""
    if isinstance(result, np.generic) or type(result) in (np.dtype, np.finfo, np.iinfo) \
            or issubclass(type(result), np.dtype) or is_literal(result):
        return ConstantValue(result)
    if type(result) in (tuple, list):
        from .containers import ListValue, TupleValue

        items = [numpy_constant(r, what) for r in result]
        return TupleValue(items) if type(result) is tuple else ListValue(items)
    raise GraphBreak(f"{what} returned a {type(result).__name__}, which is not captured")


# -- the graph node ---------------------------------------------------------------------------------

def _node_argument(value: Value, what: str) -> Value:
    """``value`` as an argument of a node running torch's NumPy: arrays as their tensors, dtypes by name."""
    from .containers import ListValue, SequenceValue, TupleValue
    from .tensor import TensorValue

    if isinstance(value, NDArrayValue):
        return value.tensor
    if isinstance(value, TensorValue):
        return value
    if isinstance(value, SequenceValue):
        items = [_node_argument(v, what) for v in value.items]
        return ListValue(items) if isinstance(value, ListValue) else TupleValue(items)
    if value.is_constant():
        c = value.as_constant()
        if isinstance(c, np.dtype) or isinstance(c, type):
            try:
                return ConstantValue(np.dtype(c).name)  # FX cannot write a class as an argument
            except TypeError as e:
                raise GraphBreak(f"{what} given the class {c.__qualname__}") from e
        if isinstance(c, (np.finfo, np.iinfo)):
            raise GraphBreak(f"{what} given a {type(c).__name__} object")
    return value


_TARGETS: dict = {}


def _graph_target(fn):
    """A plain function running ``fn`` (torch's NumPy, or an operator) on tensors, giving tensors back."""
    target = _TARGETS.get(fn)
    if target is None:
        import torch._numpy as tnp

        def target(*args, **kwargs):
            out = fn(*_to_tnp(args, tnp), **_to_tnp(kwargs, tnp))
            return _to_torch(out, tnp)

        name = getattr(fn, "__name__", "op").strip("_")
        target.__name__ = target.__qualname__ = f"numpy_{name}"
        target.__module__ = __name__
        _TARGETS[fn] = target
    return target


def _to_tnp(obj, tnp):
    if isinstance(obj, torch.Tensor):
        return tnp.ndarray(obj)
    if isinstance(obj, np.generic):
        # A NumPy scalar is typed (NEP 50), unlike the Python number it subclasses.  (Its dtype's ``.name``
        # is NumPy's Python code: a frame the hook would try to capture while the graph runs.)
        return tnp.asarray(obj.item(), dtype=_SCALAR_DTYPE_NAME[type(obj)])
    if type(obj) in (tuple, list):
        return type(obj)(_to_tnp(x, tnp) for x in obj)
    if type(obj) is dict:
        return {k: _to_tnp(v, tnp) for k, v in obj.items()}
    return obj


def _to_torch(obj, tnp):
    if isinstance(obj, tnp.ndarray):
        return obj.tensor
    if type(obj) in (tuple, list):
        return type(obj)(_to_torch(x, tnp) for x in obj)
    return obj


#: NumPy classes that are pure on constants (``np.finfo(np.float32).eps``).
_PURE_CLASSES = (np.finfo, np.iinfo, np.dtype)
_TNP_FUNCTIONS: dict = {}


def _tnp_functions() -> dict:
    """id(NumPy function) -> (the function, torch's NumPy function of the same name and namespace)."""
    if not _TNP_FUNCTIONS:
        import torch._numpy as tnp

        for np_namespace, tnp_namespace in ((np, tnp), (np.fft, tnp.fft), (np.linalg, tnp.linalg)):
            for name, fn in vars(tnp_namespace).items():
                np_fn = getattr(np_namespace, name, None)
                if callable(fn) and np_fn is not None and not name.startswith("_") and name not in _NOT_TRACED:
                    _TNP_FUNCTIONS[id(np_fn)] = (np_fn, fn)
    return _TNP_FUNCTIONS


def _ndarray_target(name: str, method: bool):
    """``a.name(*args, **kwargs)`` (or the attribute ``a.name``) on torch's NumPy array, as a plain function."""
    target = _MEMBERS.get((name, method))
    if target is None:
        if method:
            def target(a, *args, **kwargs):
                return getattr(a, name)(*args, **kwargs)
        else:
            def target(a):
                return getattr(a, name)
        target.__name__ = f"ndarray_{name}"
        _MEMBERS[name, method] = target
    return target


_MEMBERS: dict = {}


# -- the node's result as NumPy's -------------------------------------------------------------------

def _as_numpy(result: Value, example, what: str, exact: bool) -> Value:
    """The node's result seen as what NumPy returned in its own run (``example``, the result itself when
    ``exact``); a break if they differ."""
    from .containers import ListValue, SequenceValue, TupleValue
    from .tensor import TensorValue

    if isinstance(example, (np.ndarray, np.generic)):
        if not isinstance(result, TensorValue):
            raise GraphBreak(f"{what}: torch's NumPy gives {result.describe()} where NumPy gives an array")
        fake = result.fake
        expected = np.dtype(example.dtype)
        got = _NUMPY_DTYPE.get(fake.dtype)
        if got is None or np.dtype(got) != expected:
            raise GraphBreak(f"{what}: torch's NumPy computes {fake.dtype} where NumPy computes {expected.name}; "
                             "it runs eagerly")
        if _hints(fake.shape) != example.shape:
            raise GraphBreak(f"{what}: torch's NumPy gives shape {tuple(fake.shape)} where NumPy gives "
                             f"{example.shape}; it runs eagerly")
        if isinstance(example, np.generic):
            return ConstantValue(example) if exact else NDArrayValue(result, type(example))
        return NDArrayValue(result, constant=example if exact else None)
    if type(example) in (tuple, list):
        if not isinstance(result, SequenceValue) or len(result.items) != len(example):
            raise GraphBreak(f"{what}: torch's NumPy returns something other than NumPy's {type(example).__name__}")
        items = [_as_numpy(r, e, what, exact) for r, e in zip(result.items, example)]
        return ListValue(items) if type(example) is list else TupleValue(items)
    if is_literal(example) and result.is_constant() and type(result.as_constant()) is type(example) \
            and result.as_constant() == example:
        return result
    raise GraphBreak(f"{what} returned a {type(example).__name__} computed from tensor data; it runs eagerly")
