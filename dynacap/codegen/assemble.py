"""The assembler of dynacap's generated code: instruction lists (``bytecode.Bytecode``) to code objects.

``to_code`` returns exactly the code object bytecode 0.19's ``Bytecode.to_code`` returns
(every ``co_*`` field), ~5x faster on a rewritten frame (timm convnext_tiny: ~1,500
instructions, 14 ms there, under 3 here).  Bytecode spends half that time on a
control-flow graph, for the stack size and each ``try`` region's depth, and half on
``ConcreteBytecode`` objects per instruction and cache entry.  Two passes replace them:

* ``stack_depths``: generated code (a graph call inside a ``try``, loads, stores, a
  return, handlers that rerun the frame) only jumps forward, so one forward pass finds
  the graph pass's depths: a label's is the one every earlier edge brings to it, a
  ``try`` region's the lowest inside it, its handler's one more (two with
  ``push_lasti``), as ``cfg._StackSizeComputer`` records them, from bytecode's own
  per-instruction effects.  Resume functions bring their stack size and depths.
* ``assemble``: bytecode's concrete conversion for CPython 3.11 (constant, name and local
  tables in order of first use, inline caches, ``EXTENDED_ARG``, relative jumps, the
  location and exception tables) without its per-instruction objects.

It must not guess: what a pass does not model exactly (a backward jump, a label reached
at two depths, a manual ``CACHE``, an argument bytecode would reject, any Python but
3.11) goes to bytecode, which then also raises what it raises.  ``DYNACAP_CHECK_ASSEMBLY=1``
assembles every code both ways and raises on a difference (``tests/test_assemble.py``).
"""
from __future__ import annotations

import dis
import os
import sys
import types

from bytecode import Bytecode, CellVar, Compare, CompilerFlags, ConcreteBytecode, FreeVar, Instr, Label, SetLineno, \
    TryBegin, TryEnd
from bytecode.concrete import HAS_COMPARE, HAS_CONST, HAS_FREE, HAS_LOCAL, HAS_NAME
from bytecode.instr import (BITFLAG_OPCODES, CACHE_OPCODE, EXTENDEDARG_OPCODE, HAS_BACKWARD_RELATIVE_JUMP,
                            HAS_FORWARD_RELATIVE_JUMP, UNSET, InstrLocation, const_key)

#: Both passes model CPython 3.11 (its opcodes, inline caches, location and exception table formats).
_MODELLED = sys.version_info[:2] == (3, 11)
_STARTS_WITH_VALUE = CompilerFlags.GENERATOR | CompilerFlags.COROUTINE | CompilerFlags.ASYNC_GENERATOR
CHECK = os.environ.get("DYNACAP_CHECK_ASSEMBLY") == "1"


def to_code(bytecode: Bytecode, stacksize: int | None = None) -> types.CodeType:
    """``bytecode.to_code()``; with ``stacksize``, ``bytecode.to_code(stacksize=stacksize,
    compute_exception_stack_depths=False)`` (each ``TryBegin`` keeps the depth it has)."""
    if CHECK:
        return checked_to_code(bytecode, stacksize)
    return _to_code(bytecode, stacksize)


def _to_code(bytecode: Bytecode, stacksize: int | None) -> types.CodeType:
    try_depths: dict[TryBegin, int] = {}
    if stacksize is None:
        found = stack_depths(bytecode) if _MODELLED else None
        if found is None:
            return bytecode.to_code()
        stacksize, try_depths = found
    code = assemble(bytecode, stacksize, try_depths) if _MODELLED else None
    if code is None:
        for try_begin, depth in try_depths.items():
            try_begin.stack_depth = depth
        return bytecode.to_code(stacksize=stacksize, compute_exception_stack_depths=False)
    return code


def stack_depths(bytecode: Bytecode) -> tuple[int, dict[TryBegin, int]] | None:
    """The stack size and each ``TryBegin``'s depth as ``ControlFlowGraph.compute_stacksize`` finds them, or
    None where the code is not straight enough to be sure.  Like it, sizes count after each instruction
    (pre- and post-effect together) and a taken jump counts its own effect."""
    depth = 1 if bytecode.flags & _STARTS_WITH_VALUE else 0
    max_depth = 0
    reachable = True
    seen: set[Label] = set()
    #: Label -> the depth the jumps to it bring (all must agree).
    jumped_to: dict[Label, int] = {}
    #: Handler label -> the depth it starts at (from its ``try`` region, which comes first).
    handlers: dict[Label, int] = {}
    try_depths: dict[TryBegin, int] = {}
    open_try: TryBegin | None = None
    lowest = 0
    for item in bytecode:
        if isinstance(item, Instr):
            if not reachable:
                return None  # dead code: bytecode's pass skips it and gives its regions a made-up depth
            if item.has_jump():
                target = item.arg
                if open_try is not None or target in seen:
                    return None
                pre, post = item.pre_and_post_stack_effect(jump=True)
                if depth + pre < 0:
                    return None
                taken = depth + pre + post
                if jumped_to.setdefault(target, taken) != taken:
                    return None
                if taken > max_depth:
                    max_depth = taken
                if item.is_uncond_jump():
                    reachable = False
                    continue
            pre, post = item.pre_and_post_stack_effect(jump=False)
            depth += pre
            if depth < 0:
                return None
            depth += post
            if depth > max_depth:
                max_depth = depth
            if open_try is not None:
                if item.is_final():
                    return None
                if depth < lowest:
                    lowest = depth
            elif item.is_final():
                reachable = False
        elif isinstance(item, Label):
            if open_try is not None:
                return None
            seen.add(item)
            arrivals = [depth] if reachable else []
            if item in jumped_to:
                arrivals.append(jumped_to.pop(item))
            if item in handlers:
                if arrivals:
                    return None  # a handler also reached by a jump or by falling into it
                depth = handlers.pop(item)
                max_depth = max(max_depth, depth)
                reachable = True
            elif arrivals:
                if arrivals[0] != arrivals[-1]:
                    return None
                depth = arrivals[0]
                reachable = True
        elif isinstance(item, TryBegin):
            target = item.target
            if not reachable or open_try is not None or target in seen or target in handlers:
                return None
            open_try, lowest = item, depth
        elif isinstance(item, TryEnd):
            if not reachable or item.entry is not open_try:
                return None
            try_depths[open_try] = lowest
            handlers[open_try.target] = lowest + 1 + bool(open_try.push_lasti)
            open_try = None
        elif not isinstance(item, SetLineno):
            return None
    if open_try is not None or jumped_to or handlers:
        return None
    return max_depth, try_depths


def assemble(bytecode: Bytecode, stacksize: int, try_depths: dict[TryBegin, int]) -> types.CodeType | None:
    """What ``ConcreteBytecode`` makes of ``bytecode`` (``_ConvertBytecodeToConcrete``, then its ``to_code``), or
    None for what it does not model: a manual ``CACHE`` or ``EXTENDED_ARG``, an argument bytecode would not
    accept as it is, an empty or unclosed ``try`` region, a depth not set.

    ``try_depths``: depths for ``TryBegin``s whose own ``stack_depth`` is not set.
    """
    consts, const_index, names, name_index, varnames, var_index = [], {}, [], {}, [], {}
    if bytecode.docstring is not UNSET:
        _add(consts, const_index, const_key(bytecode.docstring), bytecode.docstring)
    for name in bytecode.argnames:
        _add(varnames, var_index, name, name)
    cellvars, freevars = list(bytecode.cellvars), list(bytecode.freevars)
    # One entry per instruction: opcode, oparg, location (inherited when unset, as bytecode does).
    ops: list[int] = []
    args: list[int] = []
    locations: list[InstrLocation] = []
    jumps: list[tuple[int, Label]] = []
    labels: dict[Label, int] = {}
    regions: dict[TryBegin, list[int]] = {}  # first and last instruction index of each ``try`` region
    cells: list[int] = []
    frees: list[int] = []
    location = InstrLocation._from_tuple(bytecode.first_lineno, None, None, None)
    for item in bytecode:
        if isinstance(item, Instr):
            # The slots bytecode's own converter reads (the properties cost a call each).
            if item._location is not None and item._location is not UNSET:
                location = item._location
            opcode, arg = item._opcode, item._arg
            if isinstance(arg, Label):
                jumps.append((len(ops), arg))
                arg = 0
            elif opcode in HAS_CONST:
                arg = _add(consts, const_index, const_key(arg), arg)
            elif opcode in HAS_LOCAL:
                if type(arg) is not str:
                    return None
                arg = _add(varnames, var_index, arg, arg)
            elif opcode in HAS_NAME:
                flag = 0
                if opcode in BITFLAG_OPCODES:
                    if not (type(arg) is tuple and len(arg) == 2 and isinstance(arg[0], bool)):
                        return None
                    flag, arg = int(arg[0]), arg[1]
                if type(arg) is not str:
                    return None
                index = _add(names, name_index, arg, arg)
                arg = flag + (index << 1) if opcode in BITFLAG_OPCODES else index
            elif opcode in HAS_FREE:
                if type(arg) is CellVar and arg.name in cellvars:
                    cells.append(len(ops))
                    arg = cellvars.index(arg.name)
                elif type(arg) is FreeVar and arg.name in freevars:
                    frees.append(len(ops))
                    arg = freevars.index(arg.name)
                else:
                    return None
            elif opcode in HAS_COMPARE:
                if not isinstance(arg, Compare):
                    return None
                arg = arg.value
            elif opcode == CACHE_OPCODE or opcode == EXTENDEDARG_OPCODE or not isinstance(arg, int):
                return None
            elif arg is UNSET:
                arg = 0  # assembled as a zero byte, like bytecode's
            ops.append(opcode)
            args.append(arg)
            locations.append(location)
        elif isinstance(item, Label):
            labels[item] = len(ops)
        elif isinstance(item, SetLineno):
            location = InstrLocation._from_tuple(item.lineno, None, None, None)
        elif isinstance(item, TryBegin):
            if item in regions:
                return None
            regions[item] = [len(ops), -1]
        elif isinstance(item, TryEnd):
            region = regions.get(item.entry)
            if region is None:
                return None
            region[1] = len(ops) - 1
        else:
            return None
    # Cells a local shares take the local's slot; the others follow the locals, then the free variables.
    slots, shared = {}, 0
    for i, name in enumerate(cellvars):
        if name in var_index:
            slots[i] = varnames.index(name)
            shared += 1
        else:
            slots[i] = len(varnames) + i - shared
    for k in cells:
        args[k] = slots[args[k]]
    for k in frees:
        args[k] += len(varnames) + len(cellvars) - shared
    caches = [_CACHES[op] for op in ops]
    units = [_units(arg) for arg in args]
    starts = _resolve_jumps(ops, args, units, caches, jumps, labels)
    if starts is None:
        return None
    table = _exception_table(regions, try_depths, starts, units, caches, labels)
    if table is None:
        return None
    return types.CodeType(
        bytecode.argcount, bytecode.posonlyargcount, bytecode.kwonlyargcount, len(varnames), stacksize,
        int(bytecode.flags), _code_bytes(ops, args, caches), tuple(consts), tuple(names), tuple(varnames),
        bytecode.filename, bytecode.name, bytecode.qualname, bytecode.first_lineno,
        _location_table(bytecode.first_lineno, locations, units, caches), table, tuple(freevars), tuple(cellvars))


#: Inline cache entries that follow each opcode.
_CACHES = dis._inline_cache_entries


def _add(values: list, index: dict, key, value) -> int:
    """The position of ``key`` in a table kept in order of first use (constants by ``const_key``)."""
    position = index.get(key)
    if position is None:
        position = index[key] = len(values)
        values.append(value)
    return position


def _units(arg: int) -> int:
    """Code units an instruction takes with its ``EXTENDED_ARG`` prefixes."""
    return 1 if arg <= 0xFF else 2 if arg <= 0xFFFF else 3 if arg <= 0xFFFFFF else 4


def _resolve_jumps(ops, args, units, caches, jumps, labels) -> list[int] | None:
    """Set each jump's offset, as bytecode's ``compute_jumps`` passes do (a jump growing an
    ``EXTENDED_ARG`` moves what follows: again, at most 10 passes); the start of each instruction."""
    for _ in range(10):
        starts, offset = [], 0
        for size, cache in zip(units, caches):
            starts.append(offset)
            offset += size + cache
        starts.append(offset)
        moved = False
        for index, label in jumps:
            target = labels.get(label)
            if target is None:
                return None
            after = starts[index] + caches[index] + units[index]
            if ops[index] in HAS_FORWARD_RELATIVE_JUMP:
                arg = starts[target] - after
            elif ops[index] in HAS_BACKWARD_RELATIVE_JUMP:
                arg = after - starts[target]
            else:
                return None
            if arg < 0:
                return None
            args[index] = arg
            if _units(arg) != units[index]:
                units[index] = _units(arg)
                moved = True
        if not moved:
            return starts
    return None


def _code_bytes(ops, args, caches) -> bytes:
    code = bytearray()
    for op, arg, cache in zip(ops, args, caches):
        if arg > 0xFF:
            for shift in (24, 16, 8):
                if arg >> shift:
                    code += bytes((EXTENDEDARG_OPCODE, (arg >> shift) & 0xFF))
        code += bytes((op, arg & 0xFF))
        if cache:
            code += bytes(2 * cache)
    return bytes(code)


def _exception_table(regions, try_depths, starts, units, caches, labels) -> bytes | None:
    """The 3.11 exception table (``Objects/exception_handling_notes.txt``): per region, in ``TryBegin``
    order, start, length (both in code units, the start after its ``EXTENDED_ARG``s, the end after the
    last instruction's caches), handler and depth << 1 | lasti, varints with a start marker."""
    table = bytearray()
    for try_begin, (first, last) in regions.items():
        depth = try_depths.get(try_begin, try_begin.stack_depth)
        target = labels.get(try_begin.target)
        if last < first or first >= len(units) or target is None or depth is UNSET or depth < 0:
            return None
        start = starts[first] + units[first] - 1
        for value, marker in ((start, True), (starts[last + 1] - start, False), (starts[target], False),
                              ((depth << 1) + try_begin.push_lasti, False)):
            table += _varint(value, marker)
    return bytes(table)


def _varint(value: int, start_marker: bool) -> bytes:
    """6-bit groups, most significant first, bit 6 set on all but the last, bit 7 on an entry's first."""
    groups = [value & 63]
    value >>= 6
    while value:
        groups.append(value & 63 | 64)
        value >>= 6
    if start_marker:
        groups[-1] |= 128
    return bytes(reversed(groups))


#: Bytecode's own packing of locations with columns (resume code copies the original's).
_PACKER = ConcreteBytecode()


def _location_table(first_lineno, locations, units, caches) -> bytes:
    """The 3.11 location table (``Objects/locations.md``), entries as bytecode groups them: runs of one
    location (each cache entry an instruction of its own where the line is unknown), at most 8 code
    units an entry, line deltas from the entry before."""
    buf = bytearray()
    lineno = first_lineno
    run, size = None, 0
    for location, n, cache in zip(locations, units, caches):
        if run is not None and run.lineno is not None and (run is location or run == location):
            size += n + cache
            continue
        if run is not None:
            lineno = _push_location(buf, size, lineno, run)
        if location.lineno is None and cache:
            lineno = _push_location(buf, n, lineno, location)
            for _ in range(cache - 1):
                lineno = _push_location(buf, 1, lineno, location)
            n = 1
        run, size = location, n + (cache if location.lineno is not None else 0)
    if run is not None:
        _push_location(buf, size, lineno, run)
    return bytes(buf)


def _push_location(buf: bytearray, size: int, lineno: int, location: InstrLocation) -> int:
    while True:
        header = 0x80 | (min(size, 8) - 1)
        if location.lineno is None:
            buf.append(header | 15 << 3)
        elif location.col_offset is None and location.end_lineno is None:
            # The line delta: zig-zag sign bit, then 6-bit groups, least significant first, bit 6 on all but the last.
            delta = location.lineno - lineno
            delta = (-delta << 1) | 1 if delta < 0 else delta << 1
            buf.append(header | 13 << 3)
            while delta > 63:
                buf.append(delta & 63 | 64)
                delta >>= 6
            buf.append(delta)
        else:
            _PACKER._pack_location(buf, size, lineno, location)
        if location.lineno is not None:
            lineno = location.lineno
        size -= 8
        if size < 1:
            return lineno


_FIELDS = ("co_argcount", "co_posonlyargcount", "co_kwonlyargcount", "co_nlocals", "co_stacksize", "co_flags",
           "co_code", "co_names", "co_varnames", "co_freevars", "co_cellvars", "co_filename", "co_name",
           "co_qualname", "co_firstlineno", "co_linetable", "co_exceptiontable")


def checked_to_code(bytecode: Bytecode, stacksize: int | None = None) -> types.CodeType:
    """``to_code`` compared with bytecode's field by field (constants by identity); raises on a difference."""
    # Bytecode's first: a fallback of ours sets the ``TryBegin`` depths it found.
    expected = bytecode.to_code() if stacksize is None else \
        bytecode.to_code(stacksize=stacksize, compute_exception_stack_depths=False)
    code = _to_code(bytecode, stacksize)
    differ = [name for name in _FIELDS if getattr(code, name) != getattr(expected, name)]
    if len(code.co_consts) != len(expected.co_consts) or \
            any(a is not b for a, b in zip(code.co_consts, expected.co_consts)):
        differ.append("co_consts")
    if differ:
        raise AssertionError(f"dynacap assembler: {code.co_qualname} differs from bytecode's in {', '.join(differ)}")
    return code
