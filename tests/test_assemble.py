"""The assembler of generated code (``dynacap/codegen/assemble.py``) makes bytecode's code objects, byte for byte.

Every code object here is assembled both ways and compared field by field, constants by identity
(``assemble.checked_to_code``): the rewritten frames, resume and chain functions of real captures
(the construct programs and the break programs, run with the check on), hand-written instruction lists
for what generated code seldom has (a ``try`` at a nonzero depth, ``push_lasti``, a ``try`` inside a
handler, ``EXTENDED_ARG``-sized arguments and jumps, unknown and changing lines), code the forward
pass must leave to bytecode (backward jumps, a label at two depths, dead code), and the bytecode of
real functions (loops, handlers, cells, column locations).  Hand-written code is also run.
"""
import io
import contextlib
import dis
import inspect
import types

import pytest
from bytecode import BinaryOp, Bytecode, CellVar, CompilerFlags, FreeVar, Instr, Label, SetLineno, TryBegin, TryEnd
from bytecode.instr import InstrLocation

import dynacap
from dynacap.codegen import assemble


def _bytecode(instrs, argnames=(), **attrs) -> Bytecode:
    bc = Bytecode(instrs)
    bc.argnames = list(argnames)
    bc.argcount = len(argnames)
    bc.flags = CompilerFlags.OPTIMIZED | CompilerFlags.NEWLOCALS
    bc.name = bc.qualname = "f"
    bc.first_lineno = 1
    bc.docstring = None
    for name, value in attrs.items():
        setattr(bc, name, value)
    return bc


def _reference(bc: Bytecode, stacksize=None) -> types.CodeType:
    if stacksize is None:
        return bc.to_code()
    return bc.to_code(stacksize=stacksize, compute_exception_stack_depths=False)


def _assembled(instrs, argnames=(), fast=True, **attrs) -> types.CodeType:
    """``instrs`` assembled (compared with bytecode's); ``fast``: whether both passes must model it."""
    bc = _bytecode(instrs, argnames, **attrs)
    found = assemble.stack_depths(bc)
    assert (found is not None) is fast
    if fast:
        assert assemble.assemble(bc, *found) is not None
    return assemble.checked_to_code(bc)


def _run(code: types.CodeType, *args):
    return types.FunctionType(code, {})(*args)


def _table(code: types.CodeType) -> list:
    return [(e.start, e.end, e.target, e.depth, e.lasti) for e in dis._parse_exception_table(code)]


# -- real captures ----------------------------------------------------------------------------------
def _programs():
    from constructs import PROGRAMS
    import break_programs

    for prog in PROGRAMS.values():
        yield prog.fn, prog.build, prog.fn.__globals__
    for _, fn, make_inputs in break_programs.PROGRAMS:
        yield fn, (lambda make_inputs=make_inputs: make_inputs()[0]), break_programs.__dict__


def test_captures_assemble_as_bytecode(monkeypatch):
    """Rewritten, resume and chain code of every construct and break program: both ways, the same code."""
    from test_constructs import _plain_globals, _restore

    seen = {"codes": 0, "resumes": 0, "fast": 0}
    differences = []
    checked, depths = assemble.checked_to_code, assemble.stack_depths

    def counting_check(bc, stacksize=None):
        seen["codes"] += 1
        seen["resumes"] += stacksize is not None
        try:
            return checked(bc, stacksize)
        except AssertionError as e:  # the capture would only warn: collect it
            differences.append(str(e))
            raise

    def counting_depths(bc):
        found = depths(bc)
        seen["fast"] += found is not None
        return found

    monkeypatch.setattr(assemble, "CHECK", True)
    monkeypatch.setattr(assemble, "checked_to_code", counting_check)
    monkeypatch.setattr(assemble, "stack_depths", counting_depths)
    for fn, build, module_globals in _programs():
        saved = _plain_globals(module_globals)
        compiled = dynacap.optimize(fn, backend="eager")
        with contextlib.redirect_stdout(io.StringIO()):
            try:
                compiled(*build())
            except Exception:
                pass  # programs that raise by design
        _restore(module_globals, saved)
    assert differences == []
    assert seen["codes"] >= 800 and seen["resumes"] >= 100, seen
    assert seen["fast"] == seen["codes"] - seen["resumes"], seen  # generated code: never bytecode's graph pass


# -- hand-written code ------------------------------------------------------------------------------
def _divide_under_try(push_lasti=False):
    """``10 + x / y``, the division inside a ``try`` at depth 1 whose handler returns the 10."""
    handler = Label()
    try_begin = TryBegin(handler, push_lasti=push_lasti)
    pops = [Instr("POP_TOP")] * (2 if push_lasti else 1)
    return [Instr("RESUME", 0), Instr("LOAD_CONST", 10), try_begin,
            Instr("LOAD_FAST", "x"), Instr("LOAD_FAST", "y"), Instr("BINARY_OP", BinaryOp.TRUE_DIVIDE),
            TryEnd(try_begin), Instr("BINARY_OP", BinaryOp.ADD), Instr("RETURN_VALUE"),
            handler, *pops, Instr("RETURN_VALUE")], try_begin


@pytest.mark.parametrize("push_lasti", [False, True])
def test_try_at_nonzero_depth(push_lasti):
    instrs, try_begin = _divide_under_try(push_lasti)
    assert assemble.stack_depths(_bytecode(instrs, ("x", "y"))) == (3, {try_begin: 1})
    code = _assembled(instrs, ("x", "y"))
    assert [row[3:] for row in _table(code)] == [(1, push_lasti)]
    assert (_run(code, 6, 2), _run(code, 1, 0)) == (13.0, 10)


def test_try_inside_a_handler():
    """A graph call's handler with the ``except`` body under a second ``try`` (``push_lasti``), as CPython's."""
    handler, cleanup = Label(), Label()
    outer, inner = TryBegin(handler, False), TryBegin(cleanup, True)
    code = _assembled([
        Instr("RESUME", 0), Instr("LOAD_CONST", "kept"), outer,
        Instr("LOAD_FAST", "x"), Instr("LOAD_CONST", 0), Instr("BINARY_OP", BinaryOp.TRUE_DIVIDE),
        TryEnd(outer), Instr("RETURN_VALUE"),
        handler, Instr("PUSH_EXC_INFO"), inner, Instr("POP_TOP"), Instr("LOAD_CONST", "caught"), TryEnd(inner),
        Instr("SWAP", 2), Instr("POP_EXCEPT"), Instr("RETURN_VALUE"),
        cleanup, Instr("COPY", 3), Instr("POP_EXCEPT"), Instr("RERAISE", 1),
    ], ("x",))
    assert [row[3:] for row in _table(code)] == [(1, False), (2, True)]
    assert _run(code, 1) == "caught"


def test_two_graph_calls_each_under_its_try():
    body, handlers = [Instr("RESUME", 0)], []
    for k in range(2):
        handler = Label()
        try_begin = TryBegin(handler, False)
        body += [try_begin, Instr("LOAD_FAST", "x"), Instr("LOAD_CONST", k), Instr("BINARY_OP", BinaryOp.TRUE_DIVIDE),
                 TryEnd(try_begin), Instr("STORE_FAST", f"r{k}")]
        handlers += [handler, Instr("POP_TOP"), Instr("LOAD_CONST", f"handler {k}"), Instr("RETURN_VALUE")]
    code = _assembled(body + [Instr("LOAD_FAST", "r1"), Instr("RETURN_VALUE")] + handlers, ("x",))
    assert _run(code, 4) == "handler 0"
    assert len(_table(code)) == 2


def test_shared_handler_and_nested_tries_go_to_bytecode():
    handler = Label()
    first, second = TryBegin(handler, False), TryBegin(handler, False)
    _assembled([Instr("RESUME", 0), first, Instr("LOAD_CONST", 1), Instr("POP_TOP"), TryEnd(first),
                second, Instr("LOAD_CONST", 2), Instr("POP_TOP"), TryEnd(second),
                Instr("LOAD_CONST", None), Instr("RETURN_VALUE"),
                handler, Instr("POP_TOP"), Instr("LOAD_CONST", None), Instr("RETURN_VALUE")], fast=False)
    outer, inner = TryBegin(Label(), False), TryBegin(Label(), False)
    nested = _bytecode([outer, inner, Instr("LOAD_CONST", None), TryEnd(inner), TryEnd(outer), Instr("RETURN_VALUE")])
    with pytest.raises(RuntimeError, match="nested"):  # bytecode's own error
        assemble.to_code(nested)


def test_extended_args():
    """More than 256 constants, locals and globals, and a forward jump over more than 256 code units."""
    skip = Label()
    instrs = [Instr("RESUME", 0)]
    for k in range(300):
        instrs += [Instr("LOAD_CONST", k * 1.5), Instr("STORE_FAST", f"v{k}")]
    instrs += [Instr("LOAD_FAST", "flag"), Instr("POP_JUMP_FORWARD_IF_FALSE", skip)]
    instrs += [Instr("LOAD_GLOBAL", (False, f"g{k}")) for k in range(300)]  # 6 code units each
    instrs += [Instr("BUILD_TUPLE", 300), Instr("RETURN_VALUE"), skip, Instr("LOAD_FAST", "v299"),
               Instr("RETURN_VALUE")]
    code = _assembled(instrs, ("flag",))
    assert len(code.co_consts) > 256 and len(code.co_varnames) > 256 and len(code.co_names) > 256
    assert dis.opmap["EXTENDED_ARG"] in code.co_code[::2]
    assert _run(code, False) == 448.5
    with pytest.raises(NameError):
        _run(code, True)


def test_jump_offsets_grow_together():
    """Jumps whose offsets cross 255 as the ones before them take an ``EXTENDED_ARG``: several passes."""
    end = Label()
    instrs = [Instr("RESUME", 0)]
    instrs += [x for _ in range(40) for x in (Instr("LOAD_FAST", "x"), Instr("POP_JUMP_FORWARD_IF_TRUE", end))]
    instrs += [Instr("NOP")] * 180 + [Instr("LOAD_CONST", "fell through"), Instr("RETURN_VALUE"),
                                      end, Instr("LOAD_CONST", "jumped"), Instr("RETURN_VALUE")]
    code = _assembled(instrs, ("x",))
    assert (_run(code, True), _run(code, False)) == ("jumped", "fell through")


def test_lines_unknown_changing_and_with_columns():
    instrs = [Instr("RESUME", 0, lineno=1), SetLineno(3), Instr("LOAD_FAST", "x"),
              Instr("LOAD_ATTR", "real", lineno=None),  # an unknown line: its cache entries are entries of their own
              Instr("LOAD_CONST", 1, lineno=200), Instr("BINARY_OP", BinaryOp.ADD, lineno=2),
              Instr("LOAD_CONST", 2), *[Instr("NOP", lineno=2) for _ in range(20)],
              Instr("BINARY_OP", BinaryOp.MULTIPLY, location=InstrLocation(7, 7, 4, 30)),
              Instr("LOAD_CONST", 3, location=InstrLocation(9, 12, 300, 2)),
              Instr("BINARY_OP", BinaryOp.ADD, location=InstrLocation(10, 10, 8, 9)),
              Instr("RETURN_VALUE", location=InstrLocation(11, 11, 100, 200))]
    code = _assembled(instrs, ("x",), first_lineno=1)
    assert _run(code, 2) == 9
    assert {line for _, _, line in code.co_lines()} >= {None, 2, 3, 7, 9, 10, 11, 200}


def test_backward_jump_goes_to_bytecode():
    top, done = Label(), Label()
    instrs = [Instr("RESUME", 0), Instr("LOAD_CONST", 0), Instr("STORE_FAST", "total"),
              top, Instr("LOAD_FAST", "n"), Instr("POP_JUMP_FORWARD_IF_FALSE", done),
              Instr("LOAD_FAST", "total"), Instr("LOAD_FAST", "n"), Instr("BINARY_OP", BinaryOp.INPLACE_ADD),
              Instr("STORE_FAST", "total"), Instr("LOAD_FAST", "n"), Instr("LOAD_CONST", 1),
              Instr("BINARY_OP", BinaryOp.INPLACE_SUBTRACT), Instr("STORE_FAST", "n"), Instr("JUMP_BACKWARD", top),
              done, Instr("LOAD_FAST", "total"), Instr("RETURN_VALUE")]
    code = _assembled(instrs, ("n",), fast=False)
    assert _run(code, 4) == 10
    # With a stack size given (resume functions), the loop is assembled here.
    bc = _bytecode(instrs, ("n",))
    assert assemble.assemble(bc, code.co_stacksize, {}) is not None
    assert assemble.checked_to_code(bc, code.co_stacksize).co_code == code.co_code


def test_label_at_two_depths_and_dead_code_go_to_bytecode():
    join = Label()
    _assembled([Instr("RESUME", 0), Instr("LOAD_FAST", "x"), Instr("LOAD_FAST", "x"),
                Instr("POP_JUMP_FORWARD_IF_TRUE", join), Instr("LOAD_CONST", 1), join,
                Instr("RETURN_VALUE")], ("x",), fast=False)
    _assembled([Instr("RESUME", 0), Instr("LOAD_CONST", 1), Instr("RETURN_VALUE"),
                Instr("LOAD_CONST", 2), Instr("RETURN_VALUE")], fast=False)


def test_generator_code_starts_with_a_value():
    """A generator's frame starts with one item on the stack; a taken jump's depth counts toward the size."""
    target = Label()
    instrs = [Instr("JUMP_FORWARD", target), target, Instr("RETURN_VALUE")]
    bc = _bytecode(instrs, flags=CompilerFlags.GENERATOR | CompilerFlags.OPTIMIZED | CompilerFlags.NEWLOCALS)
    assert assemble.stack_depths(bc) == (1, {})
    assert assemble.checked_to_code(bc).co_stacksize == 1

    def generator(x):
        yield x
        return x + 1

    assert assemble.checked_to_code(Bytecode.from_code(generator.__code__)).co_code == generator.__code__.co_code


def test_cells_and_free_variables():
    """A closure's cells and free variables take their slots after the locals (a cell an argument shares
    takes the argument's)."""
    instrs = [Instr("MAKE_CELL", CellVar("a")), Instr("MAKE_CELL", CellVar("c")), Instr("COPY_FREE_VARS", 1),
              Instr("RESUME", 0), Instr("LOAD_CONST", 5), Instr("STORE_DEREF", CellVar("c")),
              Instr("LOAD_DEREF", CellVar("a")), Instr("LOAD_DEREF", CellVar("c")), Instr("BINARY_OP", BinaryOp.ADD),
              Instr("LOAD_DEREF", FreeVar("free")), Instr("BINARY_OP", BinaryOp.ADD), Instr("RETURN_VALUE")]
    code = _assembled(instrs, ("a",), cellvars=["a", "c"], freevars=["free"])
    cell = types.CellType(100)
    assert types.FunctionType(code, {}, closure=(cell,))(1) == 106


# -- real functions' bytecode ----------------------------------------------------------------------
def _codes(module):
    todo = [obj.__code__ for obj in vars(module).values() if inspect.isfunction(obj)]
    todo += [f.__code__ for cls in vars(module).values() if inspect.isclass(cls)
             for f in vars(cls).values() if inspect.isfunction(f)]
    while todo:
        code = todo.pop()
        yield code
        todo += [c for c in code.co_consts if isinstance(c, types.CodeType)]


def test_real_functions():
    """The bytecode of library functions, assembled as ``Bytecode.to_code`` does and as resume code is."""
    import json.decoder
    import textwrap

    from dynacap.codegen import breaks, resume
    from dynacap.interpreter import tracer

    counts = {"codes": 0, "fast depths": 0}
    for module in (assemble, breaks, resume, tracer, json.decoder, textwrap, contextlib, inspect):
        for code in _codes(module):
            counts["codes"] += 1
            try:
                _reference(Bytecode.from_code(code))
            except Exception:
                continue  # bytecode itself cannot rebuild it
            counts["fast depths"] += assemble.stack_depths(Bytecode.from_code(code)) is not None
            assemble.checked_to_code(Bytecode.from_code(code))
            kept = Bytecode.from_code(code, conserve_exception_block_stackdepth=True)
            assemble.checked_to_code(kept, code.co_stacksize)
    assert counts["codes"] > 300 and counts["fast depths"] > 50, counts


def test_check_names_what_differs(monkeypatch):
    """``DYNACAP_CHECK_ASSEMBLY=1``'s comparison catches a wrong field (here a wrong stack size)."""
    monkeypatch.setattr(assemble, "stack_depths", lambda bc: (7, {}))
    with pytest.raises(AssertionError, match="differs from bytecode's in co_stacksize$"):
        assemble.checked_to_code(_bytecode([Instr("RESUME", 0), Instr("LOAD_CONST", 1), Instr("RETURN_VALUE")]))
