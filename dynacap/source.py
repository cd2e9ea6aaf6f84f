"""Sources: how to reach a value from a frame.

Every value the interpreter meets that came from outside the traced code
knows its ``Source``.  Guards are written as Python expressions over the
frame's locals ``L`` and globals ``G`` (``Source.expr``), and the code
generator reloads a value in bytecode (``Source.emit``).  Sources are small
immutable descriptions: they never hold the value itself.
"""
from __future__ import annotations

from dataclasses import dataclass

from bytecode import Instr


class SourceCode(list):
    """The instructions ``Source.emit`` returns, tagged with the source they load.

    The code generator loads a tagged list through ``Emitter.load_source``,
    which may read the value from a snapshot instead (a source read after
    side effects changed what it points into).
    """

    def __init__(self, instructions, source: "Source"):
        super().__init__(instructions)
        self.source = source


class Source:
    """Base class. ``expr()`` is a Python expression over ``L``/``G``; ``emit()`` yields bytecode.

    A source is immutable and its expression a function of its fields, so each class's ``expr`` is
    computed once per source object (a parameter's source is a chain of a dozen links, and a capture
    asks for its expression tens of thousands of times).
    """

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        expr = cls.__dict__.get("expr")
        if expr is not None:
            slot = f"_expr_of_{cls.__qualname__}"  # per class: a subclass's expr may call its base's

            def cached(self, _expr=expr, _slot=slot):
                text = self.__dict__.get(_slot)
                if text is None:
                    text = _expr(self)
                    object.__setattr__(self, _slot, text)
                return text

            cached.__doc__, cached.__name__, cached.__qualname__ = expr.__doc__, "expr", expr.__qualname__
            cls.expr = cached

    def expr(self) -> str:
        raise NotImplementedError

    def emit(self) -> "SourceCode":
        """The instructions that push the value, tagged with this source (see ``SourceCode``)."""
        return SourceCode(self.load(), self)

    def load(self) -> list[Instr]:
        raise NotImplementedError

    def reads_through(self) -> "Source | None":
        """The source of the object this one reads inside (``base`` of ``base[k]``); None for a name."""
        return getattr(self, "base", None)

    def root(self) -> "Source":
        return self

    def constants(self) -> dict:
        """Objects the guard expression refers to by name (bound into the compiled check)."""
        base = getattr(self, "base", None)
        return base.constants() if base is not None else {}

    def __str__(self) -> str:
        return self.expr()


@dataclass(frozen=True)
class LocalSource(Source):
    """A frame local or argument; ``is_free`` for a closure variable (read via its cell)."""

    name: str
    is_free: bool = False

    def expr(self) -> str:
        return f"L[{self.name!r}]"

    def load(self) -> list[Instr]:
        return [Instr("LOAD_DEREF" if self.is_free else "LOAD_FAST", _cellref(self.name) if self.is_free else self.name)]


@dataclass(frozen=True)
class GlobalSource(Source):
    name: str

    def expr(self) -> str:
        return f"G[{self.name!r}]"

    def load(self) -> list[Instr]:
        return [Instr("LOAD_GLOBAL", (False, self.name))]


#: id(globals dict) -> (its module's name, the name guards call it by), and each name's owner: one name per
#: dict (``globals_ref``).
_GLOBALS_REFS: dict[int, tuple] = {}
_REF_OWNERS: dict[str, int] = {}


def globals_ref(module_name: str, globals_dict: dict) -> str:
    """The name a guard expression gives another module's globals: ``___g_`` and the module's name with
    every other character an ``_``, and a number after it when another dict took that name first (``a.b``
    and ``a_b``, two namespaces of one name).  Guards are told apart by their text: two dicts under one
    name would share each other's guards.  A name stays its dict's while guards hold the dict, so its id
    cannot be another's meanwhile."""
    known = _GLOBALS_REFS.get(id(globals_dict))
    if known is not None and known[0] == module_name:
        return known[1]
    base = "___g_" + "".join(c if c.isalnum() else "_" for c in module_name)
    ref, n = base, 1
    while _REF_OWNERS.get(ref, id(globals_dict)) != id(globals_dict):
        ref, n = f"{base}_{n}", n + 1
    _GLOBALS_REFS[id(globals_dict)] = (module_name, ref)
    _REF_OWNERS[ref] = id(globals_dict)
    return ref


@dataclass(frozen=True, eq=False)
class ModuleGlobalSource(Source):
    """A global of another module (an inlined function's ``__globals__``), read from that dict."""

    module_name: str
    name: str
    globals_dict: dict

    def _ref(self) -> str:
        return globals_ref(self.module_name, self.globals_dict)

    def expr(self) -> str:
        return f"{self._ref()}[{self.name!r}]"

    def constants(self) -> dict:
        return {self._ref(): self.globals_dict}

    def load(self) -> list[Instr]:
        return [Instr("LOAD_CONST", self.globals_dict), Instr("LOAD_CONST", self.name), Instr("BINARY_SUBSCR")]


@dataclass(frozen=True, eq=False)
class ClassSource(Source):
    """A class the trace knows without a path from the frame (``type(self)``): the class object itself."""

    cls: type

    def _ref(self) -> str:
        return f"___class_{id(self.cls):x}"

    def expr(self) -> str:
        return self._ref()

    def constants(self) -> dict:
        return {self._ref(): self.cls}

    def load(self) -> list[Instr]:
        return [Instr("LOAD_CONST", self.cls)]


@dataclass(frozen=True)
class BuiltinSource(Source):
    """A name found in builtins (not shadowed by a global at capture time)."""

    name: str

    def expr(self) -> str:
        return f"B[{self.name!r}]"

    def load(self) -> list[Instr]:
        return [Instr("LOAD_GLOBAL", (False, self.name))]


@dataclass(frozen=True)
class AttrSource(Source):
    base: Source
    name: str

    def expr(self) -> str:
        return f"{self.base.expr()}.{self.name}"

    def load(self) -> list[Instr]:
        return self.base.emit() + [Instr("LOAD_ATTR", self.name)]

    def root(self) -> Source:
        return self.base.root()


@dataclass(frozen=True)
class DictEntrySource(Source):
    """``base.<dict_attr>[key]``: a module's child, parameter or buffer, read without ``__getattr__``."""

    base: Source
    dict_attr: str
    key: str

    def expr(self) -> str:
        return f"{self.base.expr()}.{self.dict_attr}[{self.key!r}]"

    def load(self) -> list[Instr]:
        return self.base.emit() + [
            Instr("LOAD_ATTR", self.dict_attr),
            Instr("LOAD_CONST", self.key),
            Instr("BINARY_SUBSCR"),
        ]

    def root(self) -> Source:
        return self.base.root()


@dataclass(frozen=True)
class ItemSource(Source):
    """``base[index]`` for a constant index (tuple/list position or dict key)."""

    base: Source
    index: object

    def expr(self) -> str:
        return f"{self.base.expr()}[{self.index!r}]"

    def load(self) -> list[Instr]:
        return self.base.emit() + [Instr("LOAD_CONST", self.index), Instr("BINARY_SUBSCR")]

    def root(self) -> Source:
        return self.base.root()


@dataclass(frozen=True)
class KeyedItemSource(Source):
    """``base[key]`` for a key that is itself an object reached from the frame (a tensor keying a dict)."""

    base: Source
    key: Source

    def expr(self) -> str:
        return f"{self.base.expr()}[{self.key.expr()}]"

    def load(self) -> list[Instr]:
        return self.base.emit() + self.key.emit() + [Instr("BINARY_SUBSCR")]

    def root(self) -> Source:
        return self.base.root()

    def constants(self) -> dict:
        return {**self.base.constants(), **self.key.constants()}


@dataclass(frozen=True)
class CellContentsSource(Source):
    """The contents of a closure cell of a function reached by ``base``."""

    base: Source
    index: int
    name: str

    def expr(self) -> str:
        return f"{self.base.expr()}.__closure__[{self.index}].cell_contents"

    def load(self) -> list[Instr]:
        return self.base.emit() + [
            Instr("LOAD_ATTR", "__closure__"),
            Instr("LOAD_CONST", self.index),
            Instr("BINARY_SUBSCR"),
            Instr("LOAD_ATTR", "cell_contents"),
        ]

    def root(self) -> Source:
        return self.base.root()


def _cellref(name: str):
    from bytecode import FreeVar

    return FreeVar(name)


def _call_on_base(fn, base: Source, arg) -> list[Instr]:
    """``fn(base, arg)``: a read that must bypass the object's own lookup hooks."""
    return [Instr("PUSH_NULL"), Instr("LOAD_CONST", fn), *base.emit(), Instr("LOAD_CONST", arg),
            Instr("PRECALL", 2), Instr("CALL", 2)]


@dataclass(frozen=True)
class GenericAttrSource(AttrSource):
    """``object.__getattribute__(base, name)``: an attribute read past the class's own lookup hooks.

    Guards and reloads through this source never call the user's ``__getattribute__``/``__getattr__``.
    It is an ``AttrSource`` for everything else (what a side effect's ``setattr`` may change).
    """

    def expr(self) -> str:
        return f"object.__getattribute__({self.base.expr()}, {self.name!r})"

    def load(self) -> list[Instr]:
        return _call_on_base(object.__getattribute__, self.base, self.name)

    def constants(self) -> dict:
        return {**self.base.constants(), "object": object}


@dataclass(frozen=True)
class DictStorageSource(Source):
    """``dict.__getitem__(base, key)``: an entry of a ``dict`` subclass, past its ``__getitem__``."""

    base: Source
    key: object

    def expr(self) -> str:
        return f"dict.__getitem__({self.base.expr()}, {self.key!r})"

    def load(self) -> list[Instr]:
        return _call_on_base(dict.__getitem__, self.base, self.key)

    def root(self) -> Source:
        return self.base.root()

    def constants(self) -> dict:
        return {**self.base.constants(), "dict": dict}
