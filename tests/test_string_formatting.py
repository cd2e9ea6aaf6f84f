"""String formatting inside captured code, eager vs captured: ``str.join`` over generators and traced
items (``dynacap/models/strings.py``), ``%`` with a dict, ``str.format`` and f-strings with format specs
on values known at capture time, and what must still break.
"""
from __future__ import annotations

import pytest
import torch

import dynacap
from differential import CountingBackend, explain_captured, run_differential

CASES = {
    "join_generator": lambda x: (x + 1, ",".join(str(i) for i in range(4))),
    "join_traced_items": lambda x: (x + 1, "x".join([str(d) for d in x.shape] + [x.dtype.__repr__()[6:]])),
    "join_map": lambda x: (x * 2, "-".join(map(str, [1, 2.5, None]))),
    "join_list_iterator": lambda x: (x + 1, "".join(iter(["a", "b"]))),
    "join_dict_keys": lambda x: (x - 1, "/".join({"a": x, "b": 2})),
    "format_specs_on_sizes": lambda x: (x + 1, f"{x.shape[0]:>4}|{x.numel():03d}|{x.dim()!r}|{x.shape[0] / 3:.2f}"),
    "format_method": lambda x: (x + 1, "{}/{:>3}/{k:.1e}".format(x.shape[0], "b", k=2.5), "{0}{0}".format("z")),
    "percent_tuple": lambda x: (x + 1, "%s-%d-%.3f" % ("a", x.dim(), 1.5)),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_formatting_gives_eager_text(name):
    fn = CASES[name]
    run_differential(fn, torch.randn(3))
    out = explain_captured(fn, torch.randn(3))
    assert out.graph_break_count == 0 and out.graph_count == 1, out


LOG = []


def parts():
    for name in ("a", "b"):
        LOG.append(name)
        yield name


def test_join_pulls_a_generator_in_order():
    """The generator's side effects happen when ``join`` runs, after what comes before it."""
    def fn(x):
        LOG.clear()
        LOG.append("before")
        text = "+".join(parts())
        LOG.append("after")
        return x + 1, text, list(LOG)

    out = run_differential(fn, torch.randn(3))
    assert out.compiles_first == 1


def test_join_of_a_non_str_item_raises_type_error():
    def fn(x):
        try:
            return ",".join(i for i in [1, 2])
        except TypeError as e:
            return x + 1, str(e)

    out = run_differential(fn, torch.randn(3))
    assert out.compiles_first == 1


def test_join_of_tensor_text_breaks():
    """``str(tensor)`` reads the data: a break, with eager's text."""
    def fn(x):
        return x + 1, ",".join(str(t) for t in [x])

    run_differential(fn, torch.randn(3))
    with pytest.raises(dynacap.Unsupported):
        dynacap.optimize(fn, backend=CountingBackend(), fullgraph=True)(torch.ones(1))


def _percent_folds() -> bool:
    def probe(x):
        return x, "%(k)s" % {"k": 1}

    try:
        dynacap.optimize(probe, backend=CountingBackend(), fullgraph=True)(torch.ones(1))
    except dynacap.Unsupported:
        return False
    return True


def test_percent_with_a_dict():
    if not _percent_folds():
        pytest.xfail("`str % dict` folding waits for values/operators.py (requests-functional.md 3)")

    def fn(x, table):
        return x + 1, "%(k)s=%(v).1f" % {"k": "v", "v": 2}, "%(n)d" % table

    out = run_differential(fn, torch.randn(3), {"n": 4})
    assert out.compiles_first == 1
