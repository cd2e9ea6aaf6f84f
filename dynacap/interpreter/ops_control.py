"""Control flow: jumps on constant conditions, unrolled ``for`` loops, ``return``.

A condition must be known at capture time (a constant, guarded where it
came from the frame); a condition on tensor data is a graph break.  Loops
are unrolled: ``GET_ITER`` turns the iterable into a fixed list of items.
``with`` blocks on grad-mode contexts are captured (``values.grad_mode``);
other context managers and raising are graph breaks.  ``YIELD_VALUE`` only
runs in inlined generators (``Tracer.run_generator``).
"""
from __future__ import annotations

from ..errors import GraphBreak
from ..values.base import Value
from ..values.constant import ConstantValue
from ..values.containers import IteratorValue
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


@handles("GET_ITER")
def _get_iter(tx, ins):
    iterable = tx.pop()
    if isinstance(iterable, IteratorValue):
        tx.push(iterable)
        return
    tx.push(IteratorValue(iterable.iterate(tx)))


@handles("FOR_ITER")
def _for_iter(tx, ins):
    iterator = tx.stack[-1]
    if not isinstance(iterator, IteratorValue):
        raise GraphBreak(f"`for` over {iterator.describe()}")
    item = iterator.next_item()
    if item is None:
        tx.pop()
        tx.jump_to(ins.argval)
    else:
        tx.push(item)


@handles("RETURN_VALUE")
def _return_value(tx, ins):
    tx.return_value = tx.pop()


@handles("RAISE_VARARGS", "RERAISE", "LOAD_ASSERTION_ERROR")
def _raise(tx, ins):
    raise GraphBreak("the code raises an exception here; raising is not captured, it runs eagerly")


@handles("BEFORE_WITH")
def _before_with(tx, ins):
    from ..values.autocast import AutocastValue
    from ..values.grad_mode import GradModeValue

    manager = tx.stack[-1]
    if not isinstance(manager, (GradModeValue, AutocastValue)):
        raise GraphBreak(f"`with` on {manager.describe()}: only torch.no_grad()/torch.enable_grad() blocks are "
                         "captured; the block's code around it runs eagerly")
    tx.pop()
    tx.push(manager.enter(tx))


@handles("RETURN_GENERATOR")
def _return_generator(tx, ins):
    if tx.yielded is None:
        raise GraphBreak("a generator frame cannot be captured on its own")
    tx.push(ConstantValue(None))  # the value sent by the first next()


@handles("YIELD_VALUE")
def _yield_value(tx, ins):
    if tx.yielded is None:
        raise GraphBreak("`yield` outside an inlined generator")
    tx.yielded.append(tx.pop())
    tx.push(ConstantValue(None))  # next() sends None
