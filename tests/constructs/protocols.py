"""Python's protocol fallbacks: NotImplemented and reflection, __getattr__ after a property fails, __new__."""
import torch

from . import construct


class Meters:
    def __init__(self, v):
        self.v = v

    def __eq__(self, other):
        if not isinstance(other, Meters):
            return NotImplemented
        return self.v == other.v

    def __lt__(self, other):
        return self.v < other.v

    def __add__(self, other):
        if isinstance(other, Meters):
            return Meters(self.v + other.v)
        return NotImplemented


class Feet:
    def __init__(self, v):
        self.v = v

    def __radd__(self, other):
        return Meters(other.v + self.v * 0.3)

    def __gt__(self, other):
        return self.v * 0.3 > other.v

    def __eq__(self, other):
        return isinstance(other, Meters) and abs(other.v - self.v * 0.3) < 1e-9


class OnlyAdd:
    def __init__(self, t):
        self.t = t

    def __add__(self, other):
        return OnlyAdd(self.t + other.t)


class FailingProperty:
    def __init__(self, t):
        self.t = t

    @property
    def value(self):
        raise AttributeError("not yet")

    def __getattr__(self, name):
        return f"fallback:{name}"


class IterOnly:
    def __init__(self, items):
        self.items = items

    def __iter__(self):
        yield from self.items


class LenOnly:
    def __len__(self):
        return 0


class Unhashable:
    def __eq__(self, other):
        return True


class Singleton:
    def __new__(cls, t):
        inst = super().__new__(cls)
        inst.made_by_new = True
        return inst

    def __init__(self, t):
        self.t = t


class Other:
    pass


class Redirect:
    def __new__(cls, t):
        return Other()

    def __init__(self, t):
        raise AssertionError("not called: __new__ returned another class's object")


class Registry:
    names = []

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        cls.tag = cls.__name__.lower()


class Plugin(Registry):
    pass


class WithSuperProperty:
    @property
    def scale(self):
        return 2


class SubSuperProperty(WithSuperProperty):
    @property
    def scale(self):
        return super().scale * 10

    @classmethod
    def make(cls):
        return super().__new__(cls)


@construct()
def eq_notimplemented_falls_back(x):
    return x + (Meters(1) == 1) + (Meters(1) != "a") * 2 + (Meters(2) == Meters(2)) * 4


@construct()
def reflected_eq_of_other_class(x):
    return x + (Meters(0.3) == Feet(1)) + (Feet(1) == Meters(0.3)) * 2


@construct()
def reflected_comparison(x):
    return x + (Meters(0.1) < Feet(1))


@construct()
def radd_after_notimplemented(x):
    m = Meters(1) + Feet(10)
    return x * m.v


@construct()
def iadd_falls_back_to_add(x):
    a = OnlyAdd(x)
    alias = a
    a += OnlyAdd(x)
    return a.t, alias.t, a is alias


@construct()
def property_attributeerror_then_getattr(x):
    f = FailingProperty(x)
    return x + 1, f.value, f.missing


@construct()
def contains_falls_back_to_iter(x):
    it = IterOnly([1, 2, 3])
    return x + (2 in it) + (5 in it) * 2


@construct()
def truth_falls_back_to_len(x):
    return x + 1 if LenOnly() else x - 1


@construct()
def eq_without_hash_is_unhashable(x):
    try:
        hash(Unhashable())
    except TypeError as e:
        return x + 1, str(e)
    return x


@construct()
def new_then_init(x):
    s = Singleton(x)
    return s.t * 2, s.made_by_new


@construct()
def new_returns_other_class(x):
    r = Redirect(x)
    return x + 1, type(r).__name__


@construct()
def init_subclass_hook(x):
    return x + 1, Plugin.tag


@construct()
def super_in_property_and_classmethod(x):
    s = SubSuperProperty.make()
    return x * s.scale, type(s).__name__


@construct()
def bound_method_identity_and_self(x):
    m = Meters(3)
    f = m.__add__
    return x * f.__self__.v, f.__func__ is Meters.__add__, m.__add__ == m.__add__


@construct()
def class_attribute_list_shared(x):
    class Bag:
        items = []

        def add(self, v):
            self.items.append(v)

    a, b = Bag(), Bag()
    a.add(1)
    b.add(2)
    return x * len(Bag.items), a.items is b.items


@construct()
def instance_dict_shadows_method(x):
    class K:
        def f(self):
            return 1

    k = K()
    k.f = lambda: 5
    return x * k.f(), K().f()


@construct()
def getattr_default_and_class_lookup(x):
    class K:
        a = 1

    k = K()
    return x * getattr(k, "a") + getattr(K, "b", 10), getattr(type(k), "a")


@construct()
def type_of_class_and_metaclass(x):
    class K:
        pass

    return x + 1, type(K) is type, isinstance(K, type), K.__name__, K.__qualname__.split(".")[-1]


@construct()
def classmethod_via_instance_and_subclass(x):
    class A:
        @classmethod
        def who(cls):
            return cls.__name__

    class B(A):
        pass

    return x + 1, A.who(), B.who(), B().who()


@construct()
def staticmethod_no_self(x):
    class A:
        @staticmethod
        def f(*args):
            return len(args)

    return x * (A.f() + A().f() * 10)


@construct()
def mro_method_resolution_mixin(x):
    class Scale:
        def apply(self, t):
            return t * 2

    class Shift:
        def apply(self, t):
            return t + 1

    class Both(Shift, Scale):
        pass

    class Chained(Shift, Scale):
        def apply(self, t):
            return Scale.apply(self, Shift.apply(self, t))

    return Both().apply(x), Chained().apply(x)


@construct()
def slots_and_dict_absent(x):
    class P:
        __slots__ = ("a",)

    p = P()
    p.a = 3
    try:
        p.b = 1
    except AttributeError:
        return x * p.a, hasattr(p, "__dict__")
    return x


@construct()
def property_deleter(x):
    class P:
        def __init__(self):
            self._v = 1

        @property
        def v(self):
            return self._v

        @v.deleter
        def v(self):
            self._v = 0

    p = P()
    del p.v
    return x + p.v


@construct()
def descriptor_set_name_records(x):
    class Field:
        def __set_name__(self, owner, name):
            self.name = name

        def __get__(self, obj, owner):
            return self if obj is None else obj.__dict__.get(self.name, 7)

    class R:
        width = Field()

    return x * R().width, R.width.name


@construct()
def callable_object_in_map(x):
    class Mul:
        def __init__(self, k):
            self.k = k

        def __call__(self, t):
            return t * self.k

    return list(map(Mul(3), [x, x + 1]))


@construct()
def getitem_slice_object(x):
    class S:
        def __getitem__(self, key):
            return key

    k = S()[1:5:2]
    return x[k], (k.start, k.stop, k.step)


@construct()
def repr_default_format(x):
    class K:
        pass

    return x + 1, repr(K()).startswith("<"), str(K()).split(" ")[0].endswith("K")


class Root:
    def who(self):
        return "root"

    @classmethod
    def kind(cls):
        return "root-kind"


class Mid(Root):
    def who(self):
        return "mid>" + super().who()

    @classmethod
    def kind(cls):
        return "mid>" + super(Mid, cls).kind()


class Leaf(Mid):
    def who(self):
        def helper():
            return super(Leaf, self).who()
        return "leaf>" + helper()

    def skip(self):
        return super(Mid, self).who()


@construct()
def super_in_classmethod_two_args(x):
    return x + 1, Leaf.kind(), Leaf().kind()


@construct()
def super_explicit_in_nested_function(x):
    return x + 1, Leaf().who()


@construct()
def super_skipping_a_level(x):
    return x + 1, Leaf().skip()


@construct()
def super_called_outside_the_class(x):
    leaf = Leaf()
    return x + 1, super(Leaf, leaf).who(), super(Mid, leaf).who()


@construct()
def super_object_attributes(x):
    s = super(Leaf, Leaf())
    return x + 1, s.__thisclass__.__name__, type(s.__self__).__name__


@construct()
def super_in_dataclass_post_init(x):
    import dataclasses

    @dataclasses.dataclass(eq=False)
    class A:
        t: torch.Tensor

        def __post_init__(self):
            self.u = self.t + 1

    @dataclasses.dataclass(eq=False)
    class B(A):
        k: int = 2

        def __post_init__(self):
            super().__post_init__()
            self.u = self.u * self.k

    return B(x).u
