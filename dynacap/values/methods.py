"""Methods of symbolic values before the call: ``MethodOfValue``, and those of constants.

``owner.name`` read on a value the trace holds is a ``MethodOfValue`` until
it is called; rebuilt as that attribute when it leaves the graph.  A method
of a constant (``"a,b".split``, ``(1, 2).index``) runs at capture time on
constant arguments, or through a pure-Python model of it (``models.strings``)
on others.  Container methods are ``values.container_methods``.
"""
from __future__ import annotations

from ..errors import GraphBreak
from .base import Value, constant_args


class MethodOfValue(Value):
    """``owner.name`` for a method of a symbolic value, before the call; rebuilt as that attribute."""

    def __init__(self, owner: Value, name: str):
        self.owner = owner
        self.name = name

    def describe(self):
        return f"method .{self.name} of {self.owner.describe()}"

    def reconstruct(self, cg) -> None:
        self.owner.reconstruct(cg)
        cg.append("LOAD_ATTR", self.name)


class ConstantMethodValue(MethodOfValue):
    """A method of a constant (``"a,b".split``, ``(1, 2).index``): evaluated at capture time."""

    def call(self, tx, args, kwargs):
        const = constant_args(args, kwargs)
        if const is None and self.name == "format" and type(self.owner.as_constant()) is str:
            const = _format_arguments(self.owner.as_constant(), args, kwargs)
        if const is None:
            from ..models.strings import METHODS

            model = METHODS.get((type(self.owner.as_constant()), self.name))
            if model is None:
                raise GraphBreak(f"{self.describe()} called with non-constant arguments")
            # A model takes the values apart (``",".join(generator)`` pulls it) down to constants.
            from .wrap import wrap

            return wrap(tx, model, None).call(tx, [self.owner, *args], kwargs)
        try:
            result = getattr(self.owner.as_constant(), self.name)(*const[0], **const[1])
        except Exception as e:
            from .exceptions import from_real

            raise from_real(e, f"{self.describe()} raised {type(e).__name__}: {e}") from None
        from .wrap import wrap_constant_result

        return wrap_constant_result(result, self.describe())


def _format_arguments(template: str, args: list[Value], kwargs: dict[str, Value]):
    """``template.format(*args, **kwargs)``'s arguments as constants where the template names only constant
    ones (``"{k}".format(**locals())``): ``str.format`` never reads the others, which are passed as None.
    None when a named one is not a constant, or the template nests fields in a format spec."""
    import string

    auto = 0
    used_positions, used_names = set(), set()
    try:
        for _, field, spec, _ in string.Formatter().parse(template):
            if field is None:
                continue
            if spec and "{" in spec:
                return None
            head = field.split(".", 1)[0].split("[", 1)[0]
            if head == "":
                used_positions.add(auto)
                auto += 1
            elif head.isdigit():
                used_positions.add(int(head))
            else:
                used_names.add(head)
    except ValueError:
        return None  # the real call raises it (with every argument a constant)
    if any(not args[i].is_constant() for i in used_positions if i < len(args)) \
            or any(not kwargs[k].is_constant() for k in used_names if k in kwargs):
        return None
    return ([a.as_constant() if i in used_positions else None for i, a in enumerate(args)],
            {k: v.as_constant() if k in used_names else None for k, v in kwargs.items()})
