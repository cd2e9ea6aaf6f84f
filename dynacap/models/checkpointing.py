"""``torch.utils.checkpoint.checkpoint`` and ``checkpoint_sequential``: the functions called on their arguments.

Non-reentrant checkpointing changes what autograd keeps (it recomputes the
forward in the backward, with the random state it had), never a value or a
gradient: tracing the function itself gives eager's results.  The reentrant
form differs (its output requires grad only if an input does), so it is not
modelled: ``eager_reason`` sends it to the real function, run eagerly.
``checkpoint_sequential`` is torch's own loop over the segments with each
segment's checkpoint a plain call, so it raises where torch's does.
"""
from __future__ import annotations

import torch


def eager_reason(kwargs: dict) -> str | None:
    """Why a call with these keyword arguments (constants) must run the real function, or None."""
    if kwargs.get("use_reentrant", None) is not False:
        return "reentrant checkpointing (use_reentrant not False) runs eagerly"
    if kwargs.get("context_fn") is not None:
        return "checkpointing with a context_fn runs eagerly"
    return None


def checkpoint(function, *args, use_reentrant=None, context_fn=None, determinism_check="default", debug=False,
               preserve_rng_state=True, **kwargs):
    return function(*args, **kwargs)


def sequential_eager_reason(kwargs: dict) -> str | None:
    """Why ``checkpoint_sequential`` with these keyword arguments must run the real function, or None.

    ``use_reentrant`` given by position is not seen here: such a call runs eagerly too.
    """
    if kwargs.get("use_reentrant", None) is not False:
        return "reentrant checkpointing (use_reentrant not False) runs eagerly"
    return None


def checkpoint_sequential(functions, segments, input, use_reentrant=None, **kwargs):
    kwargs.pop("preserve_rng_state", True)
    if kwargs:
        raise ValueError("Unexpected keyword arguments: " + ",".join(arg for arg in kwargs))
    if isinstance(functions, torch.nn.Sequential):
        functions = list(functions.children())
    segment_size = len(functions) // segments
    end = -1
    for start in range(0, segment_size * (segments - 1), segment_size):
        end = start + segment_size - 1
        for j in range(start, end + 1):
            input = functions[j](input)
    for j in range(end + 1, len(functions)):
        input = functions[j](input)
    return input
