"""The statement productions of the fuzz grammar, one function per feature.

Each ``@statement(name, weight)`` function takes ``(w, scope, depth)`` (``w``
is the ``grammar.Writer``) and returns the lines of one statement (compound
statements included), or ``None`` when it does not apply at this point (the
writer then picks another).  They must write valid Python that runs eagerly
for the inputs of ``fuzz.inputs``; raising on purpose is its own production.
Names in the comments ("issue 7 item N") say which known engine bug a
production is there to reach.
"""
from __future__ import annotations

from .grammar import ENTRY, Scope, statement

CATCHABLE = "(ValueError, IndexError, KeyError, ZeroDivisionError, RuntimeError, NameError)"


def _mutable(scope: Scope, name: str) -> bool:
    """``name`` is visible and not being iterated over (mutating it would change the loop)."""
    return name in scope.names and name not in scope.frozen


# -- tensors and numbers -------------------------------------------------------------------
@statement("assign_tensor", 6)
def assign_tensor(w, scope, depth):
    targets = scope.of("tensor", assignable=True)
    if targets and w.rng.random() < 0.3:
        name = w.rng.choice(targets)
    else:
        name = w.fresh("t")
    line = f"{name} = {w.tensor(scope)}"
    scope.define(name, "tensor")
    return [line]


@statement("assign_num", 3)
def assign_num(w, scope, depth):
    name = w.fresh("n")
    line = f"{name} = {w.num(scope)}"
    scope.define(name, "num")
    return [line]


@statement("assign_scalar", 2)
def assign_scalar(w, scope, depth):
    name = w.fresh("s")
    line = f"{name} = {w.scalar(scope)}"
    scope.define(name, "scalar")
    return [line]


@statement("augassign", 3)
def augassign(w, scope, depth):
    """``t += ...``: in place on the caller's tensor when ``t`` is an argument."""
    if w.rng.random() < 0.5:
        targets = scope.of("tensor", assignable=True)
        return [f"{w.rng.choice(targets)} {w.rng.choice(['+=', '*=', '-='])} {w.tensor(scope)}"] if targets else None
    targets = scope.of("num", assignable=True)
    return [f"{w.rng.choice(targets)} {w.rng.choice(['+=', '-=', '*='])} {w.num(scope)}"] if targets else None


@statement("inplace_method", 2)
def inplace_method(w, scope, depth):
    targets = [n for n in scope.of("tensor") if n not in ("obj.w",)]
    if not targets:
        return None
    target = w.rng.choice(targets)
    return [w.rng.choice([f"{target}.add_({w.num(scope)})", f"{target}.mul_({w.num(scope)})",
                          f"{target}.clamp_(-2.0, 2.0)", f"{target}.add_({w.tensor(scope)})"])]


@statement("layer_call", 1.5)
def layer_call(w, scope, depth):
    """A module of ``LAYERS`` called on a tensor: ``nn.Identity`` and an eval-mode ``nn.Dropout`` return
    their argument itself (``is`` tells), an in-place ``nn.ReLU`` changes it (an argument: the caller's)."""
    tensors = scope.of("tensor")
    if not tensors:
        return None
    name, source = w.fresh("t"), w.rng.choice(tensors)
    kind = w.rng.choice(["ident", "drop", "relu"])
    if kind == "relu":
        target = source if w.rng.random() < 0.3 else f"{w.tensor(scope)}.clone()"
        line = f"{name} = LAYERS['relu']({target}) + 1"
    else:
        line = f"{name} = LAYERS[{kind!r}]({source}) * (1 + (LAYERS[{kind!r}]({source}) is {source}))"
    scope.define(name, "tensor")
    return [line]


# -- containers ----------------------------------------------------------------------------
@statement("list_local", 2)
def list_local(w, scope, depth):
    name = w.fresh("lst")
    items = ", ".join(w.tensor(scope) for _ in range(w.rng.randint(0, 2)))
    scope.define(name, "list")
    return [f"{name} = [{items}]"]


@statement("list_mutate", 4)
def list_mutate(w, scope, depth):
    """append/pop/setitem/insert/extend/del on a list (the argument ``xs`` or a local one)."""
    lists = [n for n in scope.of("list") if _mutable(scope, n)]
    if not lists:
        return None
    lst = w.rng.choice(lists)
    t = w.tensor(scope)
    choice = w.rng.randrange(9)
    if choice == 0:
        return [f"{lst}.append({t})"]
    if choice == 1:
        return [f"{lst}.insert(0, {t})"]
    if choice == 2:
        return [f"{lst}.extend([{t}, {w.tensor(scope)}])"]
    if choice == 3:
        return [f"if {lst}:", f"    del {lst}[-1]"]
    if choice == 4:
        return [f"{lst}.reverse()"]
    # The rest read a value out of the list and then write to the list (issue 7 item 3).
    name = w.fresh("t")
    scope.define(name, "tensor")
    if choice == 5:
        return [f"{name} = {lst}.pop() if {lst} else {t}"]
    if choice == 6:
        return [f"{name} = {lst}.pop(0) if {lst} else {t}"]
    if choice == 7:
        return [f"{name} = {lst}[0] if {lst} else {t}", f"if {lst}:", f"    {lst}[0] = {w.tensor(scope)}"]
    return [f"{name} = {lst}[-1] if {lst} else {t}", f"{lst}.append({name} * 2)"]


@statement("dict_mutate", 3)
def dict_mutate(w, scope, depth):
    """setitem/pop/setdefault/update/del on ``d``, including storing a local list (aliasing)."""
    if not _mutable(scope, "d"):
        return None
    choice = w.rng.randrange(8)
    if choice == 0:
        return [f'd["a"] = {w.tensor(scope)}']
    if choice == 1:
        return [f'd["n"] = d.get("n", 0) + {w.num(scope)}']
    if choice == 2:
        name = w.fresh("t")
        line = f'{name} = d.pop("a", {w.tensor(scope)})'
        scope.define(name, "tensor")
        return [line]
    if choice == 3:
        return [f'd.update(z={w.num(scope)})']
    if choice == 4:
        return ['if "z" in d:', '    del d["z"]']
    if choice == 5:
        return [f'd.setdefault("log", []).append({w.num(scope)})']
    lists = scope.of("list")
    if lists:  # an alias from the dict to a list that may be mutated later (issue 7 item 5)
        return [f'd["h"] = {w.rng.choice(lists)}']
    return [f'd["t{w.rng.randrange(3)}"] = {w.tensor(scope)}']


@statement("obj_attr", 3)
def obj_attr(w, scope, depth):
    """Attribute writes on the object argument."""
    if "obj" not in scope.names:
        return None
    choice = w.rng.randrange(5)
    if choice == 0:
        return ["obj.count += 1"]
    if choice == 1:
        return [f"obj.w = {w.tensor(scope)}"]
    if choice == 2:
        return [f"obj.log.append({w.num(scope)})"]
    if choice == 3:
        return [f'setattr(obj, "extra", {w.num(scope)})']
    lists = scope.of("list")  # an alias; nothing appends through it, so no loop over the list grows
    return [f"obj.items = {w.rng.choice(lists)}"] if lists else ["obj.count -= 1"]


@statement("global_write", 3)
def global_write(w, scope, depth):
    """Writes to the generated module's globals (``global`` declared at the function's top)."""
    choice = w.rng.randrange(3)
    if choice == 0:
        scope.function.global_writes.add("G_COUNT")
        return [f"G_COUNT += {w.rng.choice(['1', '2'])}"]
    if choice == 1:
        return [f"G_LIST.append({w.num(scope)})"]
    scope.function.global_writes.add("G_LAST")
    return [f"G_LAST = {w.value(scope)}"]


# -- printing ------------------------------------------------------------------------------
@statement("print_buf", 3)
def print_buf(w, scope, depth):
    """print to the StringIO argument (a graph break), with keywords (issue 7 item 4 in loops/try)."""
    if "buf" not in scope.names:
        return None
    choice = w.rng.randrange(4)
    if choice == 0:
        return [f"print({w.num(scope)}, file=buf)"]
    if choice == 1:
        return [f'print("v", {w.num(scope)}, sep="-", end=";", file=buf)']
    if choice == 2:
        return [f'buf.write(str({w.num(scope)}) + "\\n")']
    return [f"print(tuple({w.tensor(scope)}.shape), file=buf)"]


@statement("print_stdout", 2)
def print_stdout(w, scope, depth):
    choice = w.rng.randrange(3)
    if choice == 0:
        return [f'print("out", {w.num(scope)})']
    if choice == 1:
        return [f"print({w.scalar(scope)})"]
    return [f'print("shape", list({w.tensor(scope)}.shape), end="|")']


# -- control flow --------------------------------------------------------------------------
@statement("if_else", 4)
def if_else(w, scope, depth):
    if depth >= w.MAX_DEPTH:
        return None
    lines = [f"if {w.condition(scope)}:"] + w.sub_block(scope, depth)
    if w.rng.random() < 0.6:
        lines += ["else:"] + w.sub_block(scope, depth)
    return lines


@statement("for_range", 3)
def for_range(w, scope, depth):
    if depth >= w.MAX_DEPTH:
        return None
    i = w.fresh("i")
    child = scope.child()
    child.define(i, "num")
    child.in_loop = True
    bound = w.rng.choice(["2", "3", "len(xs)" if "xs" in scope.names else "2"])
    body = w.indent(w.block(child, depth + 1, w.rng.randint(1, 3)))
    return [f"for {i} in range({bound}):"] + body


@statement("for_list", 3)
def for_list(w, scope, depth):
    """Loops over a list (not mutated inside), with enumerate/zip/unpacking."""
    if depth >= w.MAX_DEPTH:
        return None
    lists = scope.of("list")
    if not lists:
        return None
    lst = w.rng.choice(lists)
    child = scope.child()
    child.in_loop = True
    child.frozen.add(lst)
    t = w.fresh("e")
    child.define(t, "tensor")
    choice = w.rng.randrange(3)
    if choice == 0:
        head = f"for {t} in {lst}:"
    elif choice == 1:
        i = w.fresh("i")
        child.define(i, "num")
        head = f"for {i}, {t} in enumerate({lst}):"
    else:
        u = w.fresh("e")
        child.define(u, "tensor")
        head = f"for {t}, {u} in zip({lst}, {lst}[1:]):"
    return [head] + w.indent(w.block(child, depth + 1, w.rng.randint(1, 3)))


@statement("while_loop", 2)
def while_loop(w, scope, depth):
    if depth >= w.MAX_DEPTH:
        return None
    c = w.fresh("c")
    child = scope.child()
    child.in_loop = True
    child.names[c] = "num"  # readable, never assigned in the body (the loop must end)
    cond = f"{c} < {w.rng.choice(['2', '3'])}"
    if w.allowed("tensor_branch") and w.rng.random() < 0.3:
        w.use("tensor_branch")
        cond += f" and {w.scalar(scope)} > -100"
    return [f"{c} = 0", f"while {cond}:", f"    {c} += 1"] + w.indent(w.block(child, depth + 1, w.rng.randint(1, 3)))


@statement("loop_exit", 2)
def loop_exit(w, scope, depth):
    if not scope.in_loop:
        return None
    return [f"if {w.condition(scope)}:", f"    {w.rng.choice(['break', 'continue'])}"]


@statement("no_grad", 2)
def no_grad(w, scope, depth):
    if depth >= w.MAX_DEPTH:
        return None
    return ["with torch.no_grad():"] + w.sub_block(scope, depth)


@statement("try_except", 3)
def try_except(w, scope, depth):
    if depth >= w.MAX_DEPTH:
        return None
    e = w.fresh("err")
    lines = ["try:"] + w.sub_block(scope, depth)
    handled = w.rng.random() < 0.8
    if handled:
        lines += [f"except {CATCHABLE} as {e}:", f'    print("caught", type({e}).__name__, file=buf)']
        if w.rng.random() < 0.4:
            lines += ["else:"] + w.sub_block(scope, depth)
    if not handled or w.rng.random() < 0.5:
        lines += ["finally:"] + w.sub_block(scope, depth)
    return lines


@statement("raise_if", 1.5)
def raise_if(w, scope, depth):
    exc = w.rng.choice(["ValueError", "KeyError", "RuntimeError", "IndexError"])
    return [f"if {w.condition(scope)}:", f'    raise {exc}("bad " + str({w.num(scope)}))']


@statement("early_return", 1.5)
def early_return(w, scope, depth):
    if depth == 0 and w.rng.random() < 0.5:
        return None  # keep most programs running to their end
    if scope.function is not None and scope.function.name != ENTRY:
        return [f"if {w.condition(scope)}:", f"    return {w.tensor(scope)}"]  # helpers return tensors
    return [f"if {w.condition(scope)}:"] + w.indent(w.ret(scope))


@statement("raising_op", 0.3)
def raising_op(w, scope, depth):
    """A tensor op that raises at run time after earlier side effects (issue 7 item 11)."""
    name = w.fresh("t")
    op = w.rng.choice(["x[torch.tensor([50])]", "x.view(7, -1)", "torch.cat([x, x.t()])",
                       "x.reshape(-1)[100]"])
    scope.define(name, "tensor")
    return [f"{name} = {op}"]


# -- unpacking and comprehensions ----------------------------------------------------------
@statement("unpack", 2)
def unpack(w, scope, depth):
    a, b = w.fresh("t"), w.fresh("t")
    choice = w.rng.randrange(3)
    if choice == 0:
        line = f"{a}, {b} = {w.tensor(scope)}, {w.tensor(scope)}"
    elif choice == 1 and "xs" in scope.names:
        line = f"{a}, *{b} = xs + [x]"
        scope.define(a, "tensor")
        scope.define(b, "list")
        return [line]
    else:
        n = w.fresh("n")
        line = f"({a}, {n}), {b} = ({w.tensor(scope)}, {w.num(scope)}), {w.tensor(scope)}"
        scope.define(n, "num")
    scope.define(a, "tensor")
    scope.define(b, "tensor")
    return [line]


@statement("comprehension", 3)
def comprehension(w, scope, depth):
    lists = scope.of("list")
    lst = w.rng.choice(lists) if lists else None
    choice = w.rng.randrange(4)
    if choice == 0 and lst:
        e = w.fresh("e")
        child = scope.child()
        child.define(e, "tensor")
        name = w.fresh("lst")
        line = f"{name} = [{w.tensor(child)} for {e} in {lst}]"
        scope.define(name, "list")
        return [line]
    if choice == 1:
        i = w.fresh("i")
        child = scope.child()
        child.define(i, "num")
        name = w.fresh("dd")
        line = f"{name} = {{str({i}): {w.num(child)} for {i} in range(3)}}"
        scope.define(name, "dict")
        return [line]
    if choice == 2 and lst:
        e = w.fresh("e")
        name = w.fresh("s")
        line = f"{name} = sum(({e}.sum() for {e} in {lst}), x.sum() * 0)"
        scope.define(name, "scalar")
        return [line]
    name = w.fresh("t")
    line = f"{name} = torch.stack([{w.tensor(scope)} for _ in range(2)]).sum(0)"
    scope.define(name, "tensor")
    return [line]


# -- helpers -------------------------------------------------------------------------------
@statement("nested_function", 2)
def nested_function(w, scope, depth):
    """A nested tensor -> tensor helper that reads the enclosing function's variables (cells)."""
    if depth >= w.MAX_DEPTH or scope.function is None or scope.function.name.startswith("h"):
        return None
    name = w.fresh("h")
    lines, _ = w.function(name, [("a", "tensor")], scope, depth + 1, w.rng.randint(0, 2),
                          tail=lambda s: [f"return {w.tensor(s)}"])
    scope.define(name, "fn_tensor")
    call = w.fresh("t")
    line = f"{call} = {name}({w.tensor(scope)})"
    scope.define(call, "tensor")
    return lines + [line]


@statement("lambda", 1)
def lambda_(w, scope, depth):
    name = w.fresh("h")
    child = scope.child()
    child.define("a", "tensor")
    line = f"{name} = lambda a: {w.tensor(child)}"
    scope.define(name, "fn_tensor")
    return [line]


@statement("closure_nonlocal", 2)
def closure_nonlocal(w, scope, depth):
    """A counter closure with ``nonlocal``, called now (and later, as a number source)."""
    if scope.function is None or scope.function.name != ENTRY or depth >= w.MAX_DEPTH:
        return None
    cnt, name = w.fresh("cnt"), w.fresh("bump")
    start = w.num(scope)
    scope.define(cnt, "num")
    scope.function.captured.add(cnt)
    scope.define(name, "fn_num")
    return [f"{cnt} = {start}", f"def {name}(by=1):", f"    nonlocal {cnt}", f"    {cnt} += by",
            f"    return {cnt}", f"{w.fresh('n')} = {name}({w.rng.choice(['1', '2'])})"]


@statement("cell_after_break", 1)
def cell_after_break(w, scope, depth):
    """A local read by a closure, first assigned inside a block after a break (issue 7 item 6)."""
    if scope.function is None or scope.function.name != ENTRY or depth >= w.MAX_DEPTH:
        return None
    v, h, out = w.fresh("cv"), w.fresh("h"), w.fresh("t")
    block = w.rng.choice(["if", "for", "with"])
    head = {"if": f"if {w.condition(scope, tensor_ok=False)}:", "for": "for _ in range(1):",
            "with": "with torch.no_grad():"}[block]
    lines = [f"print({w.num(scope)}, file=buf)", head, f"    {v} = {w.tensor(scope)}"]
    if block == "if":
        lines += ["else:", f"    {v} = {w.tensor(scope)}"]
    lines += [f"def {h}():", f"    return {v} * 2", f"{out} = {h}()"]
    scope.function.captured.add(v)
    scope.define(out, "tensor")
    return lines


@statement("recursive_helper", 1.5)
def recursive_helper(w, scope, depth):
    if "rec" not in w.module_helpers:
        w.module_helpers["rec"] = name = w.fresh("rec")
        w.module_lines += [f"def {name}(t, n):", "    if n <= 0:", "        return t",
                           f"    return {name}(t * 0.5 + 1, n - 1)", ""]
    name = w.module_helpers["rec"]
    out = w.fresh("t")
    line = f"{out} = {name}({w.tensor(scope)}, {w.rng.choice(['0', '1', '3'])})"
    scope.define(out, "tensor")
    return [line]


@statement("varargs_helper", 1.5)
def varargs_helper(w, scope, depth):
    if "va" not in w.module_helpers:
        w.module_helpers["va"] = name = w.fresh("va")
        w.module_lines += [f"def {name}(*args, scale=1, **kw):", "    out = args[0]", "    for a in args[1:]:",
                           "        out = out + a", '    return out * scale + kw.get("shift", 0)', ""]
    name = w.module_helpers["va"]
    out = w.fresh("t")
    args = ", ".join(w.tensor(scope) for _ in range(w.rng.randint(1, 3)))
    kwargs = w.rng.choice(["", f", scale={w.num(scope)}", f", shift={w.num(scope)}", ", **{'shift': 2}"])
    line = f"{out} = {name}({args}{kwargs})"
    scope.define(out, "tensor")
    return [line]


@statement("generator", 2)
def generator(w, scope, depth):
    """A generator with side effects between its yields, consumed lazily (issue 7 item 2)."""
    if "gen" not in w.module_helpers:
        w.module_helpers["gen"] = name = w.fresh("gen")
        w.module_lines += [f"def {name}(t, n, log):", "    for i in range(n):", "        log.append(i)",
                           "        yield t * (len(log) + i)", ""]  # reads what the consumer changes
    name = w.module_helpers["gen"]
    log = "G_LIST" if w.rng.random() < 0.5 else ("obj.log" if "obj" in scope.names else "G_LIST")
    call = f"{name}({w.tensor(scope)}, {w.rng.choice(['2', '3', '5'])}, {log})"
    choice = w.rng.randrange(5)
    out = w.fresh("t")
    scope.define(out, "tensor")
    if choice == 0:
        e = w.fresh("e")
        return [f"{out} = x", f"for {e} in {call}:", f"    {out} = {out} + {e}", f"    {log}.append(-1)",
                f'    d["n"] = d.get("n", 0) + 1' if "d" in scope.names else "    pass"]
    if choice == 4 and "d" in scope.names:  # a generator expression over state its consumer changes
        e = w.fresh("e")
        return [f"{out} = x", f'for {e} in ({w.tensor(scope)} * d.get("n", 0) for _ in range(3)):',
                f"    {out} = {out} + {e}", '    d["n"] = d.get("n", 0) + 1']
    if choice == 1:
        return [f"{out} = next({call})"]
    if choice == 2:
        e = w.fresh("e")
        return [f"{out} = x", f"for {e}, _ in zip({call}, range(2)):", f"    {out} = {out} * {e}"]
    return [f"{out} = sum({call})"]


# -- frame introspection and del -----------------------------------------------------------
@statement("del_local", 1)
def del_local(w, scope, depth):
    names = [n for n in sorted(scope.block) if scope.names.get(n) in Scope.KINDS
             and (scope.function is None or n not in scope.function.captured)]
    names = [n for n in names if n not in ("x", "y", "xs", "d", "obj", "buf", "k")]
    if not names:
        return None
    name = w.rng.choice(names)
    scope.forget(name)
    return [f"del {name}"]


@statement("del_arg", 0.7)
def del_arg(w, scope, depth):
    """``del`` of an argument, then a read of it (issue 7 item 7)."""
    if scope.function is None or scope.function.name != ENTRY or "k" not in scope.own or depth > 0 \
            or "k" in scope.function.captured:
        return None
    scope.forget("k")
    return ["del k", "try:", "    print(k, file=buf)", "except NameError as e:",
            '    print("unbound", type(e).__name__, file=buf)']


@statement("locals_read", 0.7)
def locals_read(w, scope, depth):
    """``locals()`` (issue 7 item 8)."""
    if scope.function is None:
        return None
    return [w.rng.choice(['print(sorted(locals()), file=buf)', 'print(len(locals()), file=buf)',
                         'print("{k}".format(**locals()), file=buf)' if "k" in scope.own else "pass"])]


from . import productions_collections  # noqa: E402,F401  (collections, itertools, user objects)
from . import productions_sets  # noqa: E402,F401  (sets, frozensets, match statements)
from . import productions_objects  # noqa: E402,F401  (user classes, dataclasses, namedtuples, subclasses)
from . import productions_exceptions  # noqa: E402,F401  (raise/try/assert, context managers)
from . import productions_stdlib  # noqa: E402,F401  (functools, itertools, operator, collections, sorting, str)
