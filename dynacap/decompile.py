"""Readable Python source for the code dynacap emits: rewritten frames, resume functions, guards.

Rewritten code is straight-line: load the compiled graph and its inputs,
call it, replay side effects, run a break's instruction, call the resume
function, return; with one ``try`` around the graph call (rerun the frame
eagerly if it raises) and sometimes one around the eager instruction
(restore grad mode).  ``decompile`` rebuilds that source with a symbolic
stack over the handful of opcodes the emitter uses, and turns the
exception table back into ``try``/``except`` blocks; an opcode it does not
know is shown as a comment, never guessed.  A resume function is a copy of
its frame's bytecode behind a prefix that rebuilds the value stack and
jumps: ``resume_source`` shows the prefix as statements, then the user's
source from the line it resumes at.  Objects the code holds as constants
(compiled graphs, resume functions, the unhooked copy of the frame) are
named by ``Namer``.  This module only reads code objects; it never runs them.
"""
from __future__ import annotations

import dis
import keyword
import linecache
import re
import types

from .errors import frame_name, is_generated

#: Types the emitter loads as constants, by the name the ``types`` module gives them (``method`` is
#: ``types.MethodType``).
_TYPE_NAMES: dict = {}
for _name, _value in vars(types).items():
    if isinstance(_value, type) and not _name.startswith("_"):
        _TYPE_NAMES.setdefault(_value, _name)

_NULL = object()  # PUSH_NULL / the NULL half of LOAD_GLOBAL
_SELF = object()  # the self half of LOAD_METHOD

_BINARY = {0: "+", 1: "&", 2: "//", 3: "<<", 4: "@", 5: "*", 6: "%", 7: "|", 8: "**", 9: ">>", 10: "-",
           11: "/", 12: "^"}
#: Forward conditional jumps: the condition under which each is taken.
_BRANCHES = {"POP_JUMP_FORWARD_IF_TRUE": "{}", "POP_JUMP_FORWARD_IF_FALSE": "not {}",
             "POP_JUMP_FORWARD_IF_NONE": "{} is None", "POP_JUMP_FORWARD_IF_NOT_NONE": "{} is not None"}
#: Instructions that consume a value without computing (a store, a discarded result).
_KEEPS = ("STORE_FAST", "STORE_DEREF", "STORE_GLOBAL", "POP_TOP")
_UNARY = {"UNARY_NEGATIVE": "-", "UNARY_POSITIVE": "+", "UNARY_INVERT": "~", "UNARY_NOT": "not "}


def identifier(text: str) -> str:
    """``text`` as a Python name (``f (resumed at line 3)`` is ``f_resumed_at_line_3``, ``<lambda>`` ``lambda_``)."""
    out = re.sub(r"\W+", "_", text).strip("_")
    out = out if out and not out[0].isdigit() else "_" + out
    return out + "_" if keyword.iskeyword(out) else out


class Namer:
    """Names for the objects emitted code holds as constants: graphs, functions, code objects.

    A compiled graph (the backend's callable, maybe wrapped by capture: ``.compiled``) is
    ``compiled_graph_N``: N is its index in ``graphs`` (an ``explain`` record) when given, else
    the order in which this namer met it.
    """

    def __init__(self, graphs=()):
        self._graphs = {id(gm): i for i, gm in enumerate(graphs, 1)}
        self._met: dict[int, str] = {}
        self._names: dict[int, str] = {}
        #: name -> object, for every name the decompiled source uses (enough to ``exec`` it).
        self.used: dict[str, object] = {}

    def name(self, obj) -> str:
        graph = self._graph_name(obj)
        if graph is not None:
            return self._remember(graph, obj)
        code = getattr(obj, "__code__", None)
        if isinstance(code, type(identifier.__code__)):  # not ``types.FunctionType.__code__`` (a descriptor)
            return self._remember(identifier(frame_name(code)), obj)
        if isinstance(obj, type(identifier.__code__)):
            return self._remember(f"unhooked_{identifier(frame_name(obj))}", obj)
        if isinstance(obj, type):
            name = _TYPE_NAMES.get(obj) or (obj.__qualname__ if obj.__module__ == "builtins" else None)
            return self._remember(identifier(name or obj.__qualname__), obj)
        if getattr(obj, "__name__", None):
            return self._remember(identifier(obj.__name__), obj)
        if isinstance(obj, dict) and isinstance(obj.get("__name__"), str):  # a module's globals
            return self._remember(f"globals_of_{identifier(obj['__name__'])}", obj)
        return self._remember(f"{identifier(type(obj).__name__)}_object", obj)

    def _graph_name(self, obj) -> str | None:
        import torch.fx

        inner = obj
        while getattr(inner, "compiled", None) is not None:
            inner = inner.compiled
        owner = getattr(inner, "__self__", None)
        if owner is not None and id(owner) in self._graphs:
            return f"compiled_graph_{self._graphs[id(owner)]}"
        if inner is obj and not isinstance(owner, torch.fx.GraphModule):
            return None
        if id(obj) not in self._met:
            self._met[id(obj)] = f"compiled_graph_{len(self._graphs) + len(self._met) + 1}"
        return self._met[id(obj)]

    def _remember(self, name: str, obj) -> str:
        """``name`` for ``obj``, or ``name_2``... when another object already has it."""
        known = self._names.get(id(obj))
        if known is not None:
            return known
        unique, n = name, 1
        while unique in self.used:
            n += 1
            unique = f"{name}_{n}"
        self.used[unique] = obj
        self._names[id(obj)] = unique
        return unique


def _literal(value) -> bool:
    if isinstance(value, (tuple, frozenset)):
        return all(_literal(v) for v in value)
    return value is None or value is Ellipsis or isinstance(value, (bool, int, float, complex, str, bytes))


class _Decompiler:
    def __init__(self, code, namer: Namer):
        self.code = code
        self.namer = namer
        self.instructions = list(dis.get_instructions(code))
        self.index = {ins.offset: i for i, ins in enumerate(self.instructions)}
        self.handlers = _merged_handlers(code)
        self.temps = 0

    # -- blocks -------------------------------------------------------------------
    def block(self, start: int, stop: int, stack: list, indent: int, opened: int | None = None):
        """Statements for instructions ``start..stop`` (indices); whether the block ended (return/raise).

        ``opened``: the offset of a ``try`` region this block is the body of (not opened again).
        """
        lines: list[str] = []
        i = start
        kw_names = None
        while i < stop:
            ins = self.instructions[i]
            region = self.handlers.get(ins.offset)
            if region is not None and ins.offset != opened:
                end, target = region
                j = self.index.get(end, stop)
                before = list(stack)
                body, ended = self.block(i, j, stack, indent + 1, opened=ins.offset)
                if not ended and stack and stack != before and j < stop and self.instructions[j].opname in _KEEPS:
                    # The protected call's result is stored just after the region: show it inside the try.
                    self.step(self.instructions[j], stack, body, indent + 1, None)
                    j += 1
                lines.append("    " * indent + "try:")
                lines.extend(body or ["    " * (indent + 1) + "pass"])
                lines.extend(self.handler(self.index[target], indent))
                i = j
                continue
            if ins.opname == "JUMP_FORWARD":
                i = self.index[ins.argval]
                continue
            if ins.opname in _BRANCHES:
                taken_stack = list(stack[:-1])
                condition = _BRANCHES[ins.opname].format(self.atom(stack.pop()))
                taken, ended = self.block(self.index[ins.argval], stop, taken_stack, indent + 1)
                if ended:  # the branch returns: an ``if`` block, then the fall-through path
                    lines.append("    " * indent + f"if {condition}:")
                    lines.extend(taken)
                else:
                    lines.append("    " * indent + f"# if {condition}: jump to offset {ins.argval}")
                i += 1
                continue
            done, kw_names = self.step(ins, stack, lines, indent, kw_names)
            i += 1
            if done:
                return lines, True
        return lines, False

    def handler(self, i: int, indent: int) -> list[str]:
        """``except`` clause for the handler starting at instruction ``i`` (``PUSH_EXC_INFO``)."""
        pad = "    " * indent
        ins = self.instructions
        if ins[i].opname == "PUSH_EXC_INFO":
            i += 1
        kind = "BaseException"
        if i + 2 < len(ins) and ins[i + 1].opname == "CHECK_EXC_MATCH":
            kind = self.const_name(ins[i]) if ins[i].opname == "LOAD_CONST" else ins[i].argval
            i += 3  # the class, CHECK_EXC_MATCH, POP_JUMP_FORWARD_IF_FALSE
        if i < len(ins) and ins[i].opname == "POP_TOP":
            i += 1
        body, ended = self.block(i, len(ins), [], indent + 1)
        if not ended:
            body.append(pad + "    raise")
        return [pad + f"except {kind}:", *body]

    # -- one instruction ------------------------------------------------------------
    def step(self, ins, stack: list, lines: list, indent: int, kw_names):
        op, pad = ins.opname, "    " * indent
        emit = lines.append
        if op in ("RESUME", "NOP", "PRECALL", "CACHE", "EXTENDED_ARG", "COPY_FREE_VARS", "MAKE_CELL",
                  "POP_EXCEPT", "PUSH_EXC_INFO"):
            return False, kw_names
        if op == "PUSH_NULL":
            stack.append(_NULL)
        elif op == "LOAD_CONST":
            stack.append(self.const_name(ins))
        elif op in ("LOAD_FAST", "LOAD_DEREF", "LOAD_CLOSURE", "LOAD_NAME", "LOAD_CLASSDEREF"):
            stack.append(ins.argval)
        elif op == "LOAD_GLOBAL":
            if ins.arg & 1:
                stack.append(_NULL)
            stack.append(ins.argval)
        elif op == "LOAD_ATTR":
            stack.append(f"{self.atom(stack.pop())}.{ins.argval}")
        elif op == "LOAD_METHOD":
            stack.append(f"{self.atom(stack.pop())}.{ins.argval}")
            stack.append(_SELF)
        elif op == "LOAD_ASSERTION_ERROR":
            stack.append("AssertionError")
        elif op == "KW_NAMES":
            return False, self.code.co_consts[ins.arg]
        elif op == "CALL":
            args = [stack.pop() for _ in range(ins.arg)][::-1]
            second, first = stack.pop(), stack.pop()
            if first is _NULL:
                fn = second
            elif second is _SELF:
                fn = first
            else:
                fn, args = first, [second, *args]
            names = list(kw_names or ())
            positional = args[: len(args) - len(names)]
            keywords = [f"{k}={v}" for k, v in zip(names, args[len(positional):])]
            stack.append(f"{self.atom(fn)}({', '.join([*positional, *keywords])})")
            return False, None
        elif op == "CALL_FUNCTION_EX":
            kwargs = stack.pop() if ins.arg & 1 else None
            args, fn = stack.pop(), stack.pop()
            if stack and stack[-1] is _NULL:
                stack.pop()
            parts = [f"*{self.atom(args)}"] + ([f"**{self.atom(kwargs)}"] if kwargs not in (None, "{}") else [])
            stack.append(f"{self.atom(fn)}({', '.join(parts)})")
        elif op == "MAKE_FUNCTION":
            code = stack.pop()
            for flag in (8, 4, 2, 1):  # closure, annotations, kwdefaults, defaults
                if ins.arg & flag:
                    stack.pop()
            stack.append(f"{self.namer.name(types.FunctionType)}({code}, globals())")
        elif op in ("BUILD_TUPLE", "BUILD_LIST", "BUILD_SET"):
            items = [stack.pop() for _ in range(ins.arg)][::-1]
            if op == "BUILD_TUPLE":
                stack.append(f"({items[0]},)" if len(items) == 1 else f"({', '.join(items)})")
            elif op == "BUILD_LIST":
                stack.append(f"[{', '.join(items)}]")
            else:
                stack.append(f"{{{', '.join(items)}}}" if items else "set()")
        elif op == "BUILD_MAP":
            items = [stack.pop() for _ in range(2 * ins.arg)][::-1]
            stack.append("{" + ", ".join(f"{k}: {v}" for k, v in zip(items[::2], items[1::2])) + "}")
        elif op == "BUILD_CONST_KEY_MAP":
            keys = stack.pop()
            values = [stack.pop() for _ in range(ins.arg)][::-1]
            key_list = [k.strip() for k in keys.strip("()").split(",") if k.strip()]
            stack.append("{" + ", ".join(f"{k}: {v}" for k, v in zip(key_list, values)) + "}")
        elif op == "BUILD_SLICE":
            parts = [stack.pop() for _ in range(ins.arg)][::-1]
            stack.append(f"slice({', '.join(parts)})")
        elif op == "BUILD_STRING":
            parts = [stack.pop() for _ in range(ins.arg)][::-1]
            stack.append(" + ".join(parts) if parts else "''")
        elif op == "FORMAT_VALUE":
            spec = stack.pop() if ins.arg & 4 else None
            value = stack.pop()
            convert = {1: "str", 2: "repr", 3: "ascii"}.get(ins.arg & 3)
            value = f"{convert}({value})" if convert else value
            stack.append(f"format({value}, {spec})" if spec is not None else f"format({value})")
        elif op in ("LIST_EXTEND", "SET_UPDATE", "DICT_UPDATE", "DICT_MERGE", "LIST_APPEND", "SET_ADD"):
            value = stack.pop()
            target = stack[-ins.arg]
            joined = {"LIST_EXTEND": f"[*{target[1:-1]}, *{value}]" if target != "[]" else f"[*{value}]",
                      "SET_UPDATE": f"{{*{target}, *{value}}}",
                      "DICT_UPDATE": f"{{**{target}, **{value}}}" if target != "{}" else f"{{**{value}}}",
                      "DICT_MERGE": f"{{**{target}, **{value}}}" if target != "{}" else f"{{**{value}}}",
                      "LIST_APPEND": f"[*{target[1:-1]}, {value}]" if target != "[]" else f"[{value}]",
                      "SET_ADD": f"{{*{target}, {value}}}"}[op]
            stack[-ins.arg] = joined.replace("[*, ", "[")
        elif op == "BINARY_SUBSCR":
            key, obj = stack.pop(), stack.pop()
            stack.append(f"{self.atom(obj)}[{key}]")
        elif op == "BINARY_OP":
            right, left = stack.pop(), stack.pop()
            symbol = _BINARY.get(ins.arg % 13, "?")
            if ins.arg >= 13:  # in-place
                emit(pad + f"{left} {symbol}= {right}")
                stack.append(left)
            else:
                stack.append(f"({left} {symbol} {right})")
        elif op in _UNARY:
            stack.append(f"({_UNARY[op]}{stack.pop()})")
        elif op in ("COMPARE_OP", "IS_OP", "CONTAINS_OP"):
            right, left = stack.pop(), stack.pop()
            symbol = ins.argval if op == "COMPARE_OP" else (
                ("is not" if ins.arg else "is") if op == "IS_OP" else ("not in" if ins.arg else "in"))
            stack.append(f"({left} {symbol} {right})")
        elif op == "GET_ITER":
            stack.append(f"iter({stack.pop()})")
        elif op in ("STORE_FAST", "STORE_DEREF", "STORE_NAME"):
            emit(pad + f"{ins.argval} = {self.value(stack.pop())}")
        elif op == "STORE_GLOBAL":
            emit(pad + f"globals()[{ins.argval!r}] = {self.value(stack.pop())}")
        elif op == "STORE_ATTR":
            obj, value = stack.pop(), stack.pop()
            emit(pad + f"{self.atom(obj)}.{ins.argval} = {self.value(value)}")
        elif op == "STORE_SUBSCR":
            key, obj, value = stack.pop(), stack.pop(), stack.pop()
            emit(pad + f"{self.atom(obj)}[{key}] = {self.value(value)}")
        elif op in ("DELETE_FAST", "DELETE_DEREF", "DELETE_NAME"):
            if ins.argval not in stack:  # a resume prefix deletes its stack arguments once pushed
                emit(pad + f"del {ins.argval}")
        elif op == "DELETE_GLOBAL":
            emit(pad + f"del globals()[{ins.argval!r}]")
        elif op == "DELETE_ATTR":
            emit(pad + f"del {self.atom(stack.pop())}.{ins.argval}")
        elif op == "DELETE_SUBSCR":
            key, obj = stack.pop(), stack.pop()
            emit(pad + f"del {self.atom(obj)}[{key}]")
        elif op == "UNPACK_SEQUENCE":
            source = self.materialize(stack.pop(), lines, pad)
            stack.extend(f"{source}[{k}]" for k in reversed(range(ins.arg)))
        elif op == "COPY":
            stack[-ins.arg] = self.materialize(stack[-ins.arg], lines, pad)
            stack.append(stack[-ins.arg])
        elif op == "SWAP":
            stack[-1], stack[-ins.arg] = stack[-ins.arg], stack[-1]
        elif op == "POP_TOP":
            value = stack.pop() if stack else None
            if isinstance(value, str) and value.endswith(")"):
                emit(pad + value)
        elif op == "RETURN_VALUE":
            emit(pad + f"return {self.value(stack.pop())}")
            return True, kw_names
        elif op == "RERAISE":
            emit(pad + "raise")
            return True, kw_names
        elif op == "RAISE_VARARGS":
            parts = [stack.pop() for _ in range(ins.arg)][::-1]
            emit(pad + ("raise" if not parts else f"raise {parts[0]}" + (f" from {parts[1]}" if len(parts) > 1 else "")))
            return True, kw_names
        elif op == "BEFORE_WITH":
            manager = self.materialize(stack.pop(), lines, pad)
            stack.append(f"{manager}.__exit__")
            stack.append(f"{manager}.__enter__()")
        else:
            emit(pad + f"# {op} {ins.argrepr}".rstrip())
        return False, kw_names

    # -- values ---------------------------------------------------------------------
    def const_name(self, ins) -> str:
        value = ins.argval
        return repr(value) if _literal(value) else self.namer.name(value)

    def value(self, v) -> str:
        return "NULL" if v is _NULL else str(v)

    def atom(self, v) -> str:
        """``v`` as the operand of ``.attr``, a call or a subscript: parenthesized unless already atomic."""
        text = self.value(v)
        return text if _is_atomic(text) else f"({text})"

    def materialize(self, v, lines: list, pad: str) -> str:
        """A value read more than once: stored in a temporary first, unless it is a plain name."""
        text = self.value(v)
        if re.fullmatch(r"[A-Za-z_]\w*", text):
            return text
        self.temps += 1
        name = f"___tmp{self.temps}"
        lines.append(pad + f"{name} = {text}")
        return name


def _is_atomic(text: str) -> bool:
    """No operator or space outside brackets and strings (``a.b[0](c, d)`` is atomic, ``a + b`` is not)."""
    depth, quote = 0, None
    for ch in text:
        if quote:
            quote = None if ch == quote else quote
        elif ch in "'\"":
            quote = ch
        elif ch in "([{":
            depth += 1
        elif ch in ")]}":
            depth -= 1
        elif depth == 0 and not (ch.isalnum() or ch in "_."):
            return False
    return True


def _merged_handlers(code) -> dict:
    """start offset -> (end, handler) of each ``try`` body; consecutive entries with one handler merged.

    Emitted code puts every handler after the main path; entries that start at or after the first
    handler protect handler code itself (the cleanup that pops the exception): they open no ``try``.
    """
    entries = dis._parse_exception_table(code)
    first_handler = min((e.target for e in entries), default=0)
    regions: list[list[int]] = []
    for entry in entries:
        if entry.start >= first_handler:
            continue
        if regions and regions[-1][2] == entry.target and regions[-1][1] == entry.start:
            regions[-1][1] = entry.end
        else:
            regions.append([entry.start, entry.end, entry.target])
    return {start: (end, target) for start, end, target in regions}


def decompile(code, namer: Namer | None = None, name: str | None = None) -> str:
    """Python source for a code object dynacap emitted (a rewritten frame)."""
    namer = namer or Namer()
    lines, _ = _Decompiler(code, namer).block(0, len(list(dis.get_instructions(code))), [], 1)
    return f"def {name or identifier(frame_name(code))}({_parameters(code)}):\n" + "\n".join(
        "    " + line if not line.startswith("    ") else line for line in lines or ["pass"])


def resume_source(code, namer: Namer | None = None) -> str:
    """A resume function: the prefix that rebuilds the stack, then the user's source it resumes in."""
    namer = namer or Namer()
    instructions = list(dis.get_instructions(code))
    jump = next((i for i, ins in enumerate(instructions) if ins.opname.startswith("JUMP")), None)
    lines, stack = [], []
    d = _Decompiler(code, namer)
    for ins in instructions[: jump if jump is not None else 0]:
        d.step(ins, stack, lines, 1, None)
    target = instructions[jump].argval if jump is not None else None
    line = next((ins.positions.lineno for ins in instructions
                 if ins.offset == target and ins.positions and ins.positions.lineno), None)
    head = f"def {identifier(frame_name(code))}({_parameters(code)}):"
    body = ["    " + s.strip() for s in lines]
    if stack:
        body.append(f"    # the value stack is now [{', '.join(d.value(v) for v in stack)}]")
    if line is not None:
        body.append(f"    # then {code.co_name}'s own code ({code.co_filename}), from inside line {line}:")
        body.extend("    # " + text for text in _source_with_marker(code, line))
    if not lines:
        body.append("    ...")
    return "\n".join([head, *body])


def _source_with_marker(code, line: int) -> list[str]:
    """The user's function that ``code`` copies, dedented, with the line it resumes at marked ``>>``."""
    numbers = [ln for _, _, ln in code.co_lines() if ln is not None]
    first, last = min(numbers, default=line), max(numbers, default=line)
    rows = [(n, linecache.getline(code.co_filename, n).rstrip("\n")) for n in range(first, last + 1)]
    rows = [(n, t) for n, t in rows if t.strip()]
    if not rows:
        return []
    margin = min(len(t) - len(t.lstrip()) for _, t in rows)
    return [f"{'>>' if n == line else '  '} {n:>4} | {t[margin:]}" for n, t in rows]


def _parameters(code) -> str:
    """The parameter list of ``code``'s function (names only: defaults live on the function, not the code)."""
    names = [identifier(n) for n in code.co_varnames]
    positional = names[: code.co_argcount]
    keyword_only = names[code.co_argcount: code.co_argcount + code.co_kwonlyargcount]
    rest = code.co_argcount + code.co_kwonlyargcount
    star = []
    if code.co_flags & 0x04:  # *args
        star = ["*" + names[rest]]
        rest += 1
    elif keyword_only:
        star = ["*"]
    double = ["**" + names[rest]] if code.co_flags & 0x08 else []
    return ", ".join(positional + star + keyword_only + double)


def guard_source(source: str) -> str:
    """A generated guard function with its ``and`` chain one check per line."""
    out = []
    for line in source.splitlines():
        stripped = line.lstrip()
        if stripped.startswith("return ") and " and " in stripped:
            pad = line[: len(line) - len(stripped)]
            checks = _split_top_level(stripped[len("return "):], " and ")
            out.append(pad + "return (" + checks[0])
            out.extend(pad + "        and " + c for c in checks[1:])
            out[-1] += ")"
        else:
            out.append(line)
    return "\n".join(out)


def _split_top_level(text: str, sep: str) -> list[str]:
    parts, depth, quote, start, i = [], 0, None, 0, 0
    while i < len(text):
        ch = text[i]
        if quote:
            quote = None if ch == quote else quote
        elif ch in "'\"":
            quote = ch
        elif ch in "([{":
            depth += 1
        elif ch in ")]}":
            depth -= 1
        elif depth == 0 and text.startswith(sep, i):
            parts.append(text[start:i])
            i += len(sep)
            start = i
            continue
        i += 1
    parts.append(text[start:])
    return parts


def entry_source(code, rewritten, guard, namer: Namer | None = None) -> str:
    """One cache entry as Python: the resume function (if ``code`` is one), its rewritten code, its guard.

    Never raises (logs and ``explain`` call it while capturing or reporting): code it cannot show is
    named in a comment instead.
    """
    try:
        return _entry_source(code, rewritten, guard, namer or Namer())
    except Exception as e:
        return (f"# {frame_name(code)}: its rewritten code could not be shown as Python "
                f"({type(e).__name__}: {e})")


def _entry_source(code, rewritten, guard, namer: Namer) -> str:
    where = f"{code.co_filename}:{code.co_firstlineno}"
    parts = []
    name = identifier(frame_name(code))
    eager = rewritten.co_code == code.co_code
    if is_generated(code):
        parts.append(f"# resume function {frame_name(code)} ({where}), as dynacap made it:\n"
                     + resume_source(code, namer))
    if eager:
        parts.append(f"# {frame_name(code)} ({where}) runs as it is (eagerly) when its guard holds")
    elif is_generated(code):
        parts.append(f"# {frame_name(code)}, as captured (what runs when its guard holds):\n"
                     + decompile(rewritten, namer, name=name + "__captured"))
    else:
        parts.append(f"# {frame_name(code)} ({where}), rewritten (what runs when its guard holds):\n"
                     + decompile(rewritten, namer, name=name))
    compiled = getattr(guard, "compiled_guard", None)
    if compiled is not None:
        parts.append(f"# the guard of {frame_name(code)}'s entry:\n" + guard_source(compiled.source))
    return "\n\n".join(parts)
