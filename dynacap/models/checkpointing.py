"""``torch.utils.checkpoint.checkpoint``: the function called on its arguments.

Non-reentrant checkpointing changes what autograd keeps (it recomputes the
forward in the backward, with the random state it had), never a value or a
gradient: tracing the function itself gives eager's results.  The reentrant
form differs (its output requires grad only if an input does), so it is not
modelled: ``eager_reason`` sends it to the real function, run eagerly.
"""
from __future__ import annotations


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
