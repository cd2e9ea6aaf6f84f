"""Code generation: the rewritten code object a cache entry runs instead of the original."""
from .emitter import Emitter
from .rewrite import build_rewritten_code

__all__ = ["Emitter", "build_rewritten_code"]
