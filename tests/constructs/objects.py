"""Object model: user classes made in the function, attributes through the MRO, descriptors, super()."""
import abc
import collections.abc
import numbers

from . import construct, xy


class Scaler:
    factor = 2.0

    def __init__(self, k):
        self.k = k

    def apply(self, t):
        return t * self.k * self.factor


class Child(Scaler):
    def __init__(self, k, shift):
        super().__init__(k)
        self.shift = shift

    def apply(self, t):
        return super().apply(t) + self.shift


class GrandChild(Child):
    def apply(self, t):
        return super(Child, self).apply(t) - 1


class WithProperty:
    def __init__(self, t):
        self._t = t

    @property
    def doubled(self):
        return self._t * 2

    @doubled.setter
    def doubled(self, value):
        self._t = value / 2


class Positive:
    """A data descriptor: clamps on write."""

    def __set_name__(self, owner, name):
        self.name = "_" + name

    def __get__(self, obj, objtype=None):
        if obj is None:
            return self
        return getattr(obj, self.name)

    def __set__(self, obj, value):
        setattr(obj, self.name, value.clamp(min=0))


class Plus:
    """A non-data descriptor: a bound 'method' made by hand."""

    def __get__(self, obj, objtype=None):
        return lambda t: t + obj.base


class Holder:
    value = Positive()
    plus = Plus()

    def __init__(self, t, base=1.0):
        self.value = t
        self.base = base


class Slotted:
    __slots__ = ("a", "b")

    def __init__(self, a, b):
        self.a = a
        self.b = b


class Methods:
    offset = 3

    @staticmethod
    def twice(t):
        return t * 2

    @classmethod
    def make(cls, t):
        return t + cls.offset


class SubMethods(Methods):
    offset = 10


class Lazy:
    def __init__(self, t):
        self.t = t

    def __getattr__(self, name):
        if name.startswith("times_"):
            return self.t * int(name[len("times_"):])
        raise AttributeError(name)


class Recorder:
    def __init__(self):
        object.__setattr__(self, "seen", [])

    def __getattribute__(self, name):
        if name != "seen":
            object.__getattribute__(self, "seen").append(name)
        return object.__getattribute__(self, name)


class Shape(abc.ABC):
    @abc.abstractmethod
    def area(self, t):
        ...


class Square(Shape):
    def area(self, t):
        return t * t


class Base:
    def f(self, t):
        return t + 1


class Left(Base):
    def f(self, t):
        return super().f(t) * 2


class Right(Base):
    def f(self, t):
        return super().f(t) - 3


class Diamond(Left, Right):
    def f(self, t):
        return super().f(t) + 10


class Counter:
    created = 0

    def __init__(self):
        type(self).created += 0  # reads the class attribute through type()
        self.n = 0

    def tick(self, t):
        self.n += 1
        return t + self.n


class Chain:
    def __init__(self, t):
        self.t = t

    def add(self, v):
        self.t = self.t + v
        return self

    def mul(self, v):
        self.t = self.t * v
        return self


@construct()
def new_object_method(x):
    return Scaler(3).apply(x)


@construct()
def new_object_attr_write(x):
    s = Scaler(1)
    s.k = 5
    s.extra = x.sum()
    return s.apply(x) + s.extra


@construct()
def class_attribute_read(x):
    return x * Scaler.factor + Scaler(2).factor


@construct()
def instance_shadows_class_attr(x):
    s = Scaler(1)
    s.factor = 7.0
    return s.apply(x)


@construct()
def subclass_super_init(x):
    return Child(2, 1.0).apply(x)


@construct()
def super_two_arg(x):
    return GrandChild(2, 1.0).apply(x)


@construct()
def super_diamond_mro(x):
    return Diamond().f(x)


@construct()
def mro_names(x):
    names = [c.__name__ for c in Diamond.__mro__]
    return x * len(names), names


@construct()
def property_read(x):
    return WithProperty(x).doubled + 1


@construct()
def property_setter(x):
    w = WithProperty(x)
    w.doubled = x * 10
    return w._t


@construct()
def data_descriptor(x):
    h = Holder(x)
    return h.value * 2


@construct()
def non_data_descriptor(x):
    return Holder(x, base=4.0).plus(x)


@construct()
def descriptor_on_class(x):
    return x + (1 if isinstance(Holder.value, Positive) else 0)


@construct()
def slots_object(x):
    s = Slotted(x, 2)
    return s.a * s.b


@construct()
def slots_write_after(x):
    s = Slotted(x, 2)
    s.b = 5
    return s.a + s.b


@construct()
def staticmethod_call(x):
    return Methods.twice(x) + Methods().twice(x)


@construct()
def classmethod_call(x):
    return Methods.make(x) + SubMethods.make(x)


@construct()
def classmethod_on_instance(x):
    return SubMethods().make(x)


@construct()
def getattr_fallback(x):
    return Lazy(x).times_3


@construct()
def getattr_hasattr_false(x):
    lz = Lazy(x)
    return x + (1 if hasattr(lz, "nope") else 0)


@construct()
def getattribute_hook(x):
    r = Recorder()
    r.t = x
    y = r.t + 1
    return y, list(r.seen)


@construct()
def abc_isinstance(x):
    s = Square()
    return s.area(x), isinstance(s, Shape), issubclass(Square, Shape)


@construct()
def abc_collections(x):
    return x + sum([isinstance([], collections.abc.Sequence), isinstance({}, collections.abc.Mapping),
                    isinstance(3, numbers.Number), issubclass(dict, collections.abc.MutableMapping)])


@construct()
def isinstance_tuple_of_types(x, n=3):
    return x * (2 if isinstance(n, (float, int)) else 1)


@construct()
def issubclass_builtins(x):
    return x + issubclass(bool, int) + issubclass(int, object) * 2


@construct()
def type_call_compare(x):
    s = Child(1, 0.0)
    return x * (type(s) is Child) + (type(s) is Scaler)


@construct()
def type_name(x):
    return x + 1, type(Child(1, 0.0)).__name__, type(x).__name__


@construct()
def type_three_args(x):
    K = type("K", (Scaler,), {"factor": 5.0})
    return K(1).apply(x)


@construct()
def class_in_function(x):
    class Local:
        def __init__(self, t):
            self.t = t

        def get(self):
            return self.t.sin()

    return Local(x).get()


@construct()
def class_in_function_closure(x):
    scale = 4

    class Local:
        def go(self, t):
            return t * scale

    return Local().go(x)


@construct()
def class_in_function_inherits(x):
    class Local(Scaler):
        factor = 0.5

    return Local(2).apply(x)


@construct()
def class_in_function_super(x):
    class Local(Child):
        def apply(self, t):
            return super().apply(t) * 100

    return Local(1, 1.0).apply(x)


@construct()
def object_state_across_calls(x):
    c = Counter()
    a = c.tick(x)
    b = c.tick(x)
    return a + b, c.n


@construct()
def method_chaining(x):
    return Chain(x).add(1).mul(3).add(x).t


@construct()
def bound_method_stored(x):
    f = Scaler(3).apply
    return f(x) + f(x * 2)


@construct()
def unbound_method_call(x):
    return Scaler.apply(Scaler(2), x)


@construct()
def setattr_getattr_builtin(x):
    s = Scaler(1)
    setattr(s, "k", 4)
    return getattr(s, "k") * x + getattr(s, "missing", 1)


@construct()
def delattr_builtin(x):
    s = Scaler(1)
    s.k = 5
    s.tmp = 2
    delattr(s, "tmp")
    return x * s.k, hasattr(s, "tmp")


@construct()
def del_attr_statement(x):
    s = Scaler(1)
    s.factor = 9.0
    del s.factor  # the class attribute shows again
    return s.apply(x)


@construct()
def vars_of_object(x):
    s = Child(2, 3)
    return x * sum(vars(s).values()), sorted(vars(s))


@construct()
def dict_attribute(x):
    s = Scaler(3)
    return x * s.__dict__["k"]


@construct()
def object_returned(x):
    return Child(2, x + 1)


@construct()
def object_in_list(x):
    objs = [Scaler(i) for i in range(3)]
    return sum(o.apply(x) for o in objs)


@construct(xy)
def object_compare_identity(x, y):
    a, b = Scaler(1), Scaler(1)
    return x + (a is b) + (a is a) * 2 + y


@construct()
def callable_checks(x):
    return x + callable(Scaler) + callable(Scaler(1)) * 2 + callable(Scaler(1).apply) * 4


@construct()
def function_attribute(x):
    def f(t):
        return t * f.k

    f.k = 3
    return f(x)


@construct()
def function_dunder_name(x):
    return x + 1, Scaler.apply.__name__, new_object_method.__qualname__
