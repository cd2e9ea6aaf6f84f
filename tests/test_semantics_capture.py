"""Semantics of the frame callback (capture.py): log lines name frames as users know them, a break met
while building the final code, the torch-mode helpers (modes.py)."""
import logging
import warnings

import pytest
import torch

import dynacap


def two_breaks(x):
    y = x + 1
    print("one")  # FIRST-BREAK
    y = y * 2
    print("two")  # SECOND-BREAK
    return y - 1


def _line_of(fn, marker: str) -> int:
    import inspect

    lines, first = inspect.getsourcelines(fn)
    return first + next(i for i, text in enumerate(lines) if marker in text)


def after_a_break(x, n):
    y = x + 1
    print("one")  # BREAK
    return y * n


@pytest.mark.parametrize("channel,prefix", [("graph", "captured graph for "), ("guards", "guards for "),
                                            ("bytecode", "bytecode of ")])
def test_logs_name_resumed_frames(caplog, capsys, channel, prefix):
    caplog.set_level(logging.DEBUG, logger=f"dynacap.{channel}")
    dynacap.reset()
    dynacap.optimize(two_breaks, backend="eager")(torch.ones(3))
    heads = [r.getMessage()[len(prefix):].split("\n")[0] for r in caplog.records
             if r.name == f"dynacap.{channel}" and r.getMessage().startswith(prefix)]
    for marker in ("FIRST-BREAK", "SECOND-BREAK"):
        name = f"two_breaks (resumed at line {_line_of(two_breaks, marker)})"
        assert any(head.startswith(name) for head in heads), heads
    assert len(heads) >= 3 and all(head.startswith("two_breaks") and "___" not in head for head in heads), heads


def test_recompile_log_names_resumed_frames(caplog, capsys):
    caplog.set_level(logging.DEBUG, logger="dynacap.recompiles")
    dynacap.reset()
    compiled = dynacap.optimize(after_a_break, backend="eager")
    compiled(torch.ones(3), 2)
    compiled(torch.ones(3), 3)  # the root's entry hits; its resume function recompiles
    messages = [r.getMessage() for r in caplog.records if r.name == "dynacap.recompiles"]
    name = f"after_a_break (resumed at line {_line_of(after_a_break, 'BREAK')})"
    assert messages and all(m.startswith(f"recompiling {name} (") for m in messages), messages


def test_cache_limit_warning_names_resumed_frames(capsys):
    dynacap.reset()
    compiled = dynacap.optimize(after_a_break, backend="eager")
    with dynacap.config.patch(cache_size_limit=1), warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert compiled(torch.ones(3), 2).tolist() == [4.0] * 3
        assert compiled(torch.ones(3), 3).tolist() == [6.0] * 3
    texts = [str(w.message) for w in caught if "cache_size_limit" in str(w.message)]
    name = f"after_a_break (resumed at line {_line_of(after_a_break, 'BREAK')})"
    assert len(texts) == 1 and texts[0].startswith(f"dynacap: {name} ("), texts


# -- a break met while building the final code (no frame to resume in) --------------------------------
def returns_a_closure(x):
    y = x

    def g():
        return y

    return g


@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
def test_break_while_building_the_final_code_runs_eagerly(backend):
    dynacap.reset()
    compiled = dynacap.optimize(returns_a_closure, backend=backend)
    x = torch.ones(2)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # an internal error is a warning
        for _ in range(2):
            g = compiled(x)
            assert g() is x
            assert g.__code__ is returns_a_closure(x).__code__

