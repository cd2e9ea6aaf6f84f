"""``torch._foreach_addcdiv_`` / ``_foreach_addcmul_`` given a tensor of scalars, as smaller foreach ops.

Optimizers pass a tensor of step sizes while compiling (``_stack_if_compiling``);
torch's fake kernels of that overload refuse it ("Expected scalars to be on
CPU"), and so would a backend tracing the graph.  ``self += s_i * (a_i / b_i)``
is the same update made of ops whose fakes work; other overloads call the op.
"""
from __future__ import annotations

import torch


def addcdiv_(self, tensor1, tensor2, scalars=1):
    if isinstance(scalars, torch.Tensor):
        torch._foreach_add_(self, torch._foreach_mul(torch._foreach_div(tensor1, tensor2), scalars.unbind(0)))
        return None
    return torch.ops.aten._foreach_addcdiv_(self, tensor1, tensor2, scalars)


def addcmul_(self, tensor1, tensor2, scalars=1):
    if isinstance(scalars, torch.Tensor):
        torch._foreach_add_(self, torch._foreach_mul(torch._foreach_mul(tensor1, tensor2), scalars.unbind(0)))
        return None
    return torch.ops.aten._foreach_addcmul_(self, tensor1, tensor2, scalars)
