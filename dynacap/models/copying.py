"""``copy.copy`` and ``copy.deepcopy`` written in Python: the copy module's walk (the memo, ``__deepcopy__``,
``__reduce_ex__``-free rebuilding of plain containers and user objects), traced in place of the real one.

Nothing here runs at capture time: the interpreter inlines these functions as user code.  A tensor is
copied by ``Tensor.__deepcopy__``'s own rule, a graph operation.
"""
from __future__ import annotations

#: What this file models, read by ``trace_rules``: dotted name -> (model, why the model is faithful).
MODELS: dict = {}
