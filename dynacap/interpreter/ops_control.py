"""Control flow: jumps on constant conditions, unrolled ``for`` loops, ``return``, ``yield``.

A condition must be known at capture time (a constant, guarded where it
came from the frame); a condition on tensor data is a graph break.  Loops
are unrolled: ``GET_ITER`` turns a known iterable into a fixed list of
items, and a generator into itself (``FOR_ITER`` pulls its next item, which
runs its body up to the next ``yield``).  ``with`` blocks on grad-mode
contexts are captured (``values.grad_mode``); ``with`` blocks and exceptions
are ``ops_exceptions``'s.  ``YIELD_VALUE`` only runs in inlined generators
(``values.iterators.GeneratorValue``).
"""
from __future__ import annotations

import torch

from ..errors import GraphBreak
from ..values.base import Value
from ..values.constant import ConstantValue
from ..values.containers import DictValue, IteratorValue, SequenceValue
from ..values.exceptions import PythonError
from ..values.iterators import GeneratorValue, PullIterator, iterator_of
from ..regions import protected
from .tracer import handles


@handles("JUMP_FORWARD", "JUMP_BACKWARD", "JUMP_BACKWARD_NO_INTERRUPT")
def _jump(tx, ins):
    tx.jump_to(ins.argval)


def _is_none(value: Value) -> bool:
    if isinstance(value, ConstantValue):
        return value.value is None
    return False


def _pop_jump(test):
    def handler(tx, ins):
        if test(tx, tx.pop()):
            tx.jump_to(ins.argval)

    return handler


for _name, _test in {
    "POP_JUMP_FORWARD_IF_TRUE": lambda tx, v: v.truth(tx),
    "POP_JUMP_BACKWARD_IF_TRUE": lambda tx, v: v.truth(tx),
    "POP_JUMP_FORWARD_IF_FALSE": lambda tx, v: not v.truth(tx),
    "POP_JUMP_BACKWARD_IF_FALSE": lambda tx, v: not v.truth(tx),
    "POP_JUMP_FORWARD_IF_NONE": lambda tx, v: _is_none(v),
    "POP_JUMP_BACKWARD_IF_NONE": lambda tx, v: _is_none(v),
    "POP_JUMP_FORWARD_IF_NOT_NONE": lambda tx, v: not _is_none(v),
    "POP_JUMP_BACKWARD_IF_NOT_NONE": lambda tx, v: not _is_none(v),
}.items():
    handles(_name)(_pop_jump(_test))


@handles("JUMP_IF_TRUE_OR_POP")
def _jump_if_true_or_pop(tx, ins):
    if tx.stack[-1].truth(tx):
        tx.jump_to(ins.argval)
    else:
        tx.pop()


@handles("JUMP_IF_FALSE_OR_POP")
def _jump_if_false_or_pop(tx, ins):
    if not tx.stack[-1].truth(tx):
        tx.jump_to(ins.argval)
    else:
        tx.pop()


@handles("GET_ITER", "GET_YIELD_FROM_ITER")
def _get_iter(tx, ins):
    tx.push(iterator_of(tx, tx.pop()))


@handles("FOR_ITER")
def _for_iter(tx, ins):
    iterator = tx.stack[-1]
    if not isinstance(iterator, (IteratorValue, PullIterator)):
        # An iterator from outside the frame (a real generator): only eager code may advance it.
        raise GraphBreak(f"`for` over {iterator.describe()}")
    item = iterator.next_item(tx, exact=True) if isinstance(iterator, GeneratorValue) else iterator.next_item(tx)
    if item is None:
        tx.pop()
        tx.jump_to(ins.argval)
    else:
        tx.push(item)


@handles("SEND")
def _send(tx, ins):
    """``yield from``: pull the inner iterator's next item, or jump on with what it returned."""
    sent = tx.pop()
    if not _is_none(sent):
        raise GraphBreak("sending a value into a generator (`send()`) is not captured")
    receiver = tx.stack[-1]
    if not isinstance(receiver, (IteratorValue, PullIterator)):
        raise GraphBreak(f"`yield from` {receiver.describe()}")
    item = receiver.next_item(tx)
    if item is None:
        tx.stack[-1] = receiver.return_value if isinstance(receiver, GeneratorValue) else ConstantValue(None)
        tx.jump_to(ins.argval)
    else:
        tx.push(item)


@handles("RETURN_VALUE")
def _return_value(tx, ins):
    value = tx.stack[-1]
    if tx.is_root and (_reaches_pull_iterator(value, set()) or
                       any(_reaches_pull_iterator(e.value, set()) for e in tx.ctx.side_effects)):
        raise GraphBreak("returning or storing a generator made in the captured code (or a zip/map over "
                         "one) is not captured; the function runs eagerly")
    if tx.is_root and tx.ctx.unfinished_handlers():
        _close_freed_generators(tx)
    if tx.is_root and torch.is_grad_enabled() != tx.ctx.initial_grad:
        # torch.set_grad_enabled(...) called, not undone: the mode outlives the frame.
        raise GraphBreak("the function returns with the grad mode changed (torch.set_grad_enabled outside a "
                         "with block); it runs eagerly")
    tx.return_value = tx.pop()


def _close_freed_generators(tx) -> None:
    """Close, as the frame's teardown frees them, the generators left suspended inside a try or with block.

    When the frame returns, CPython clears its locals in order; a generator held by a local of the frame
    (and by nothing that outlives it: that would need the generator rebuilt, which breaks) is closed
    then, its ``finally`` or ``__exit__`` run after the return value is made.  With several, each must be
    held by one local alone (their order is the locals').  A generator no local holds was freed at a
    moment the trace does not know: the function runs eagerly.
    """
    pending = tx.ctx.unfinished_handlers()
    held = {id(g): [n for n in tx.code.co_varnames if tx.locals.get(n) is g] for g in pending}
    elsewhere = _held_elsewhere(tx, pending) if len(pending) > 1 else set()
    for g in pending:
        if not held[id(g)] or len(pending) > 1 and (len(held[id(g)]) > 1 or id(g) in elsewhere):
            raise GraphBreak(f"{g.describe()} is left suspended inside a try or with block (freeing it runs its "
                             "handler, at a moment the graph cannot replay); the function runs eagerly")
    for g in sorted(pending, key=lambda g: tx.code.co_varnames.index(held[id(g)][-1])):
        try:
            g.close(tx)
        except PythonError as e:
            # Eager prints it as unraisable ("Exception ignored in ..."): never the frame's handlers'.
            raise GraphBreak(f"closing {g.describe()} when the function returns raises "
                             f"{e.exception.cls.__name__}; the function runs eagerly") from None


def _held_elsewhere(tx, generators: list) -> set:
    """Ids of the generators that a container of the frame, a cell or another suspended generator's frame holds."""
    wanted = {id(g) for g in generators}
    found, seen = set(), set()

    def scan(value):
        if id(value) in seen:
            return
        seen.add(id(value))
        items = value.items.values() if isinstance(value, DictValue) else \
            value.items if isinstance(value, SequenceValue) else ()
        for item in items:
            found.update({id(item)} & wanted)
            scan(item)

    for value in tx.locals.values():
        scan(value)
    for box in tx.cells.values():
        found.update({id(box.peek())} & wanted)
    for g in tx.ctx.suspended_generators:
        for value in [*g.tracer.locals.values(), *g.tracer.stack]:
            found.update({id(value)} & wanted)
            scan(value)
    return found


def _reaches_pull_iterator(value: Value, seen: set) -> bool:
    if isinstance(value, PullIterator):
        return True
    if id(value) in seen:
        return False
    seen.add(id(value))
    if isinstance(value, SequenceValue):
        return any(_reaches_pull_iterator(v, seen) for v in value.items)
    if isinstance(value, DictValue):
        return any(_reaches_pull_iterator(v, seen) for v in value.items.values())
    return False


@handles("RETURN_GENERATOR")
def _return_generator(tx, ins):
    if tx.yielded is None:
        raise GraphBreak("a generator frame cannot be captured on its own")
    tx.push(ConstantValue(None))  # the value sent by the first next()


@handles("YIELD_VALUE")
def _yield_value(tx, ins):
    if tx.yielded is None:
        raise GraphBreak("`yield` outside an inlined generator")
    if not tx.managed:
        # Suspended there, the generator runs its handler when closed or freed (a `finally`, a `with`
        # block's __exit__): the trace must close it (``g.close()``) or finish it, else the frame runs
        # eagerly (``TraceContext.unfinished_handlers``).
        tx.generator.suspended_in_handler = protected(tx.code, ins.offset)
        if tx.generator.suspended_in_handler and tx.generator not in tx.ctx.suspended_generators:
            tx.ctx.suspended_generators.append(tx.generator)
    tx.yielded.append(tx.pop())
    tx.push(ConstantValue(None))  # next() sends None
