"""Iterators whose items are made on demand: generators, and ``zip``/``enumerate``/``map``/``filter`` over them.

A ``PullIterator`` produces its next item only when a consumer asks
(``next_item(tx)``), so the code that makes an item (a generator's body,
a function given to ``map``) runs interleaved with the consumer's own code,
in program order, exactly as far as eager runs it.  ``GeneratorValue``
holds the suspended ``Tracer`` of an inlined generator function and steps it
to its next ``yield``.

Iterators over items known at capture time stay ``containers.IteratorValue``
(unrolled loops resume over their remaining items).  A pull iterator is never
rebuilt at run time: the generator it stands for never existed there, so a
break that needs one makes the frame run eagerly.  Nothing here adds graph
nodes except through the code it runs.
"""
from __future__ import annotations

import types

from ..errors import GraphBreak
from .base import Value
from .constant import ConstantValue
from .containers import IteratorValue, TupleValue
from .exceptions import PythonError


def iterator_of(tx, value: Value) -> Value:
    """``iter(value)``: an iterator itself, or an ``IteratorValue`` over a known sequence's items."""
    if isinstance(value, (IteratorValue, PullIterator)):
        return value
    from .objects import ObjectValue

    if isinstance(value, ObjectValue):
        made = value.iterator(tx)  # through the class's own __iter__, pulled lazily
        if made is not None:
            return made
    from .live_iterators import live_iterator

    live = live_iterator(tx, value)  # a list, dict or set: read as it is at each next()
    if live is not None:
        return live
    if value.is_constant() and type(value.as_constant()) in _NUMBERS:
        from .exceptions import python_error, tp_name

        raise python_error(TypeError, f"'{tp_name(type(value.as_constant()))}' object is not iterable")
    return IteratorValue(value.iterate(tx))


#: Constants that are never iterable nor callable (their class runs no user code to say so).
_NUMBERS = (int, float, bool, complex, type(None))


def is_lazy(value: Value) -> bool:
    """Whether asking ``value`` for its items runs code (so consumers must pull them one at a time)."""
    return isinstance(value, PullIterator)


def contains(tx, item: Value, iterator: Value) -> bool:
    """``item in iterator``: pulls until the first item equal to ``item``, as eager does."""
    from .operators import identical

    while True:
        candidate = iterator.next_item(tx)
        if candidate is None:
            return False
        if item.is_constant() and candidate.is_constant():
            same = item.as_constant() == candidate.as_constant()
        else:
            same = identical(item, candidate)
        if same is None:
            raise GraphBreak(f"`in` over {iterator.describe()} compares values not known at capture time")
        if same:
            return True


class PullIterator(Value):
    """An iterator that runs code for each item; subclasses define ``next_item``."""

    def next_item(self, tx) -> Value | None:
        """The next item, or None once exhausted (``StopIteration`` at run time)."""
        raise NotImplementedError

    def iterate(self, tx):
        items = []
        while (item := self.next_item(tx)) is not None:
            items.append(item)
        return items

    def take_all(self, tx) -> list[Value]:
        """Every item, for a consumer that drops them all if pulling one raises (``list(it)``, unpacking)."""
        return self.iterate(tx)

    def truth(self, tx) -> bool:
        return True

    def reconstruct(self, cg):
        raise GraphBreak(f"{self.describe()} made while capturing cannot be handed to the code that runs "
                         "after the graph (its state exists only in the capture)")


class GeneratorValue(PullIterator):
    """A generator made by calling an inlined generator function (or a generator expression).

    ``tracer`` is the generator frame's child ``Tracer``, suspended after its
    last ``YIELD_VALUE``; each ``next_item`` steps it to the next yield or to
    its return.
    """

    def __init__(self, tracer, fn):
        self.tracer = tracer
        self.fn = fn
        tracer.yielded = []
        tracer.generator = self
        #: Whether it is suspended at a ``yield`` inside a try or with block: closing it (or freeing it)
        #: would run a handler (``ops_control.YIELD_VALUE``).
        self.suspended_in_handler = False
        self.done = False
        #: Set when a pull broke: the frame's state is then unknown.
        self.broken = False
        self.running = False

    def python_type(self):
        return types.GeneratorType

    def describe(self):
        name = self.fn.__qualname__
        return "a generator expression" if name.endswith("<genexpr>") else f"the generator {name}()"

    @property
    def return_value(self) -> Value:
        """What the generator returned (``StopIteration.value``; the result of ``yield from`` it)."""
        returned = self.tracer.return_value
        return returned if self.done and returned is not None else ConstantValue(None)

    def take_all(self, tx) -> list[Value]:
        items = []
        while (item := self.next_item(tx, exact=True)) is not None:
            items.append(item)
        return items

    def getattr(self, tx, name):
        if name in ("send", "close", "throw", "__next__"):
            return GeneratorMethod(self, name)
        return super().getattr(tx, name)

    def next_item(self, tx, exact: bool = False, sent: Value | None = None):
        """The next item, or None once it returned.

        ``exact``: the consumer sees what the generator raises as CPython's does (a ``for`` loop,
        ``list(g)``, ``g.send()``: the generator is then finished), so that may reach a handler of
        the consumer's frame (``Tracer.step``); any other consumer may hold items where CPython's
        C code does not, so what the generator raises is a break for it.  ``sent``: the value
        ``send()`` gives the ``yield`` the generator is suspended at.
        """
        if self.done:
            return None
        if self.broken:
            raise GraphBreak(f"{self.describe()} broke the capture earlier")
        if self.running:
            raise GraphBreak(f"{self.describe()} asks itself for its next item (ValueError at run time)")
        frame = self.tracer
        if sent is not None and frame.yielded:
            frame.stack[-1] = sent  # what the suspended `yield` evaluates to
        # The consumer is the generator's caller now: user stacks and inlining depth follow it.
        frame.parent = tx
        pulled = len(frame.yielded)
        self.running = True
        handled = tx.ctx.exc_info
        frame.pulled_by_loop = exact
        try:
            while len(frame.yielded) == pulled:
                frame.step()
                if frame.return_value is not None:
                    self.done = True
                    return None
        except GraphBreak as e:
            if exact and isinstance(e, PythonError):
                self.done = True  # it raised to its loop: finished, as eager's
            else:
                self.broken = True
            tx.ctx.exc_info = handled  # a break inside one of its handlers leaves it there
            if not e.user_stack:
                e.user_stack = frame.user_stack()
            raise
        finally:
            self.running = False
            frame.pulled_by_loop = False
        return frame.yielded[-1]

    def close(self, tx) -> Value:
        """``g.close()``: ``GeneratorExit`` thrown in at the ``yield`` it is suspended at, its handlers run."""
        from .exceptions import ExceptionValue, python_error

        frame = self.tracer
        if self.done or not frame.yielded:
            self.done = True
            return ConstantValue(None)
        if self.broken or self.running:
            raise GraphBreak(f"closing {self.describe()} is not captured")
        if not frame.catch(PythonError(ExceptionValue(GeneratorExit, []), reraise=True), frame.checkpoint()):
            self.done = True
            return ConstantValue(None)
        try:
            item = self.next_item(tx, exact=True)
        except PythonError as e:
            if issubclass(e.exception.cls, GeneratorExit):
                return ConstantValue(None)
            raise
        if item is not None:
            raise python_error(RuntimeError, "generator ignored GeneratorExit")
        return ConstantValue(None)

    def throw(self, tx, exception, exact: bool = False) -> Value | None:
        """``gen.throw(e)`` at the ``yield`` it is suspended at: its handler runs to the next item or its end.

        The next item, or None once it returned; what leaves its frame is raised (a ``PythonError``).
        ``exact``: the caller sees what leaves as CPython's does (``g.throw()`` in the code; else the
        generator must be a ``with`` block's, ``contextlib.contextmanager``).
        """
        from .exceptions import raising

        frame = self.tracer
        if self.broken or self.running or not (frame.managed or exact):
            raise GraphBreak(f"throwing an exception into {self.describe()} is not captured")
        # Not started, it is thrown in before the first instruction: no handler there.
        if self.done or not frame.yielded or not frame.catch(raising(exception, reraise=True), frame.checkpoint()):
            self.done = True
            raise raising(exception, reraise=True)
        return self.next_item(tx, exact=exact)


class GeneratorMethod(Value):
    """``g.send``, ``g.close``, ``g.throw``, ``g.__next__`` of a generator of the trace."""

    def __init__(self, generator: GeneratorValue, name: str):
        self.generator = generator
        self.name = name

    def describe(self):
        return f"{self.generator.describe()}.{self.name}"

    def call(self, tx, args, kwargs):
        from .exceptions import python_error

        g = self.generator
        if kwargs or len(args) != {"send": 1, "close": 0, "__next__": 0, "throw": 1}.get(self.name, -1):
            raise GraphBreak(f"{self.describe()} with these arguments is not captured")
        if self.name == "close":
            return g.close(tx)
        finished = g.done
        if self.name == "throw":
            item = g.throw(tx, _thrown(tx, args[0]), exact=True)
            if item is None:
                raise stop_iteration(g.return_value)
            return item
        sent = args[0] if args else None
        if sent is not None and not g.tracer.yielded and not g.done and not _is_none(sent):
            raise python_error(TypeError, "can't send non-None value to a just-started generator")
        item = g.next_item(tx, exact=True, sent=sent)
        if item is None:
            raise stop_iteration(ConstantValue(None) if finished else g.return_value)
        return item


def _thrown(tx, value: Value):
    """The exception ``g.throw(value)`` throws in: an exception of the trace, or a class called without arguments."""
    from .exceptions import ExceptionValue, is_exception_class, make_exception, python_error

    if isinstance(value, ExceptionValue):
        return value
    if is_exception_class(value):
        return make_exception(tx, value.as_constant(), [], {}, value.source)
    if value.is_constant():
        raise python_error(TypeError, "exceptions must be classes or instances deriving from BaseException, not "
                                      f"{type(value.as_constant()).__name__}")
    raise GraphBreak(f"throwing {value.describe()} into a generator is not captured")


def _is_none(value: Value) -> bool:
    return value.is_constant() and value.as_constant() is None


def stop_iteration(value: Value):
    """The ``StopIteration`` a generator's return raises to ``next()``/``send()`` (its value, if not None)."""
    from .exceptions import ExceptionValue, PythonError

    exception = ExceptionValue(StopIteration, [] if _is_none(value) else [value])
    exception.value_known = True
    return PythonError(exception, "the generator is exhausted (StopIteration at run time)")


class ZipValue(PullIterator):
    """``zip(...)``: pulls one item of each iterator in turn, as eager's zip does (an iterator keeps
    what zip did not take; a list is read as it is at each step).  ``strict``: ``zip(strict=True)``."""

    def __init__(self, iterators: list[Value], strict: bool = False):
        self.iterators = iterators
        self.strict = strict
        self.done = not iterators

    def python_type(self):
        return zip

    def describe(self):
        return "a zip object"

    def next_item(self, tx):
        if self.done:
            return None
        row = []
        for i, it in enumerate(self.iterators):
            item = it.next_item(tx)
            if item is None:
                # Eager stops at the first exhausted iterator: the later ones are not asked.
                self.done = True
                if self.strict:
                    self._check_lengths(tx, i)
                return None
            row.append(item)
        return TupleValue(row)

    def _check_lengths(self, tx, exhausted: int) -> None:
        """``zip(strict=True)``'s check once iterator ``exhausted`` ran out (CPython's ``zip_next``)."""
        from .exceptions import python_error

        if exhausted:
            plural = " " if exhausted == 1 else "s 1-"
            raise python_error(ValueError, f"zip() argument {exhausted + 1} is shorter than argument{plural}"
                                           f"{exhausted}")
        for i, it in enumerate(self.iterators[1:], 1):
            if it.next_item(tx) is not None:
                plural = " " if i == 1 else "s 1-"
                raise python_error(ValueError, f"zip() argument {i + 1} is longer than argument{plural}{i}")


def zip_of(tx, iterables: list[Value], strict: bool = False) -> ZipValue:
    """``zip(*iterables)`` pulled item by item (``ZipValue``)."""
    return ZipValue([iterator_of(tx, a) for a in iterables], strict)


class CallableIterator(PullIterator):
    """``iter(fn, sentinel)``: ``fn()`` for each item, until it returns ``sentinel`` or raises StopIteration."""

    def __init__(self, fn: Value, sentinel: Value):
        self.fn = fn
        self.sentinel = sentinel
        self.done = False

    def python_type(self):
        return type(iter(int, 0))

    def describe(self):
        return "a callable_iterator"

    def next_item(self, tx):
        if self.done:
            return None
        try:
            item = call_back(tx, self.fn, [])
        except PythonError as e:
            if not issubclass(e.exception.cls, StopIteration):
                raise _plain(e) from None
            self.done = True
            return None
        if item is self.sentinel:
            same = True  # PyObject_RichCompareBool: identity first
        elif item.is_constant() and self.sentinel.is_constant():
            same = item.as_constant() == self.sentinel.as_constant()
        else:
            from .operators import compare_op

            same = compare_op(tx, "==", item, self.sentinel).truth(tx)
        if same:
            self.done = True
            return None
        return item


def callable_iterator(tx, fn: Value, sentinel: Value) -> CallableIterator:
    """``iter(fn, sentinel)``."""
    if fn.is_constant() and not callable(fn.as_constant()):
        from .exceptions import python_error

        raise python_error(TypeError, "iter(v, w): v must be callable")
    return CallableIterator(fn, sentinel)


class EnumerateValue(PullIterator):
    def __init__(self, iterator: Value, start: int):
        self.iterator = iterator
        self.count = start

    def python_type(self):
        return enumerate

    def describe(self):
        return "an enumerate over a generator"

    def next_item(self, tx):
        item = self.iterator.next_item(tx)
        if item is None:
            return None
        index, self.count = self.count, self.count + 1
        return TupleValue([ConstantValue(index), item])


def call_back(tx, fn: Value, args: list[Value]) -> Value:
    """``fn(*args)`` called back by a builtin's model (a ``map`` function, a sort key): its result is not
    the result of the CALL being traced, so a break inside it is never resumed as if it were
    (``Tracer.direct_call``)."""
    calling, tx.calling = tx.calling, False
    try:
        return fn.call(tx, args, {})
    finally:
        tx.calling = calling


def _not_catchable(next_item):
    """What a ``map``/``filter`` function raises while pulling is a break, never a handler's.

    Its consumer may have pulled items ahead or collected them where CPython's C code
    holds them (``lst.extend(map(f, xs))`` keeps the items before the failure), and a
    ``StopIteration`` ends the consumer's loop instead of propagating: not modelled.
    """
    def pull(self, tx):
        try:
            return next_item(self, tx)
        except PythonError as e:
            raise _plain(e) from None

    return pull


def _plain(error: PythonError) -> GraphBreak:
    """``error`` as a plain break (at the same frames)."""
    plain = GraphBreak(error.reason)
    plain.frames, plain.user_stack = error.frames, error.user_stack
    return plain


class MapValue(PullIterator):
    def __init__(self, fn: Value, iterators: list[Value]):
        self.fn = fn
        self.zipped = ZipValue(iterators)

    def python_type(self):
        return map

    def describe(self):
        return "a map object"

    @_not_catchable
    def next_item(self, tx):
        row = self.zipped.next_item(tx)
        return None if row is None else call_back(tx, self.fn, row.items)


class FilterValue(PullIterator):
    def __init__(self, fn: Value | None, iterator: Value):
        self.fn = fn
        self.iterator = iterator

    def python_type(self):
        return filter

    def describe(self):
        return "a filter object"

    @_not_catchable
    def next_item(self, tx):
        while True:
            item = self.iterator.next_item(tx)
            if item is None:
                return None
            keep = item if self.fn is None else call_back(tx, self.fn, [item])
            if keep.truth(tx):
                return item
