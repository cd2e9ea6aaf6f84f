"""Compare an engine's run of a fuzz program with the eager run and name the failure class.

Classes (``CLASSES``): ``ok``; ``internal_error`` (the engine warned of an
internal error, or an exception came out of the engine's own code);
``wrong_exception`` (type or message differs, or only one side raised);
``wrong_result``; ``wrong_side_effect`` (arguments after the call, the
module's globals, printed text).  ``crash`` and ``timeout`` are given by
``batch``, which runs programs in a subprocess.  The first call that differs
decides; an internal-error warning anywhere wins.  Values are compared with
``differential.assert_same`` (the test suite's comparison).
"""
from __future__ import annotations

from dataclasses import dataclass

from differential import assert_same

from .runner import Observation, Run

CLASSES = ("ok", "wrong_result", "wrong_side_effect", "wrong_exception", "internal_error", "crash", "timeout")
FAILURES = CLASSES[1:]
RTOL, ATOL = 1e-4, 1e-5


@dataclass
class Verdict:
    cls: str
    call: int | None = None
    detail: str = ""

    @property
    def ok(self) -> bool:
        return self.cls == "ok"


def _describe(obs: Observation) -> str:
    if obs.exception is not None:
        return f"raised {obs.exception[0]}: {obs.exception[1]}" + (f" (at {obs.where})" if obs.where else "")
    return f"returned {obs.result!r}"[:400]


def _differs(expected, actual, label: str) -> str | None:
    try:
        assert_same(expected, actual, label, rtol=RTOL, atol=ATOL)
    except AssertionError as e:
        return str(e)[:600]
    return None


def compare_call(eager: Observation, other: Observation) -> tuple[str, str] | None:
    """``(class, detail)`` for the first difference of one call, or None."""
    if eager.exception != other.exception:
        cls = "internal_error" if other.engine_raised else "wrong_exception"
        return cls, f"eager {_describe(eager)}; engine {_describe(other)}"
    if eager.exception is None:
        diff = _differs(eager.result, other.result, "result")
        if diff:
            return "wrong_result", diff
    for label, e, o in (("arguments after the call", eager.args, other.args),
                        ("globals", eager.globals, other.globals)):
        diff = _differs(e, o, label)
        if diff:
            return "wrong_side_effect", diff
    if eager.stdout != other.stdout:
        return "wrong_side_effect", f"stdout: eager {eager.stdout!r}, engine {other.stdout!r}"[:600]
    return None


def classify(eager: Run, other: Run) -> Verdict:
    if other.internal_warnings:
        return Verdict("internal_error", None, other.internal_warnings[0][:600])
    for i, (e, o) in enumerate(zip(eager.calls, other.calls)):
        found = compare_call(e, o)
        if found:
            return Verdict(found[0], i, found[1])
    return Verdict("ok")
