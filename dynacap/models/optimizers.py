"""``torch.optim``'s step wrapper (``_use_grad_for_differentiable``): the step under the optimizer's grad mode.

The real wrapper sets the grad mode, asks another compiler to split its graph
around the step (a no-op here), and restores the mode in a ``finally``.  A
graph that raises restores the modes itself (``modes.restoring_modes_on_error``),
so the model needs no handler around the step's in-place updates.
"""
from __future__ import annotations

import torch


def use_grad_for_differentiable(step, *args, **kwargs):
    prev_grad = torch.is_grad_enabled()
    torch.set_grad_enabled(args[0].defaults["differentiable"])
    result = step(*args, **kwargs)
    torch.set_grad_enabled(prev_grad)
    return result
