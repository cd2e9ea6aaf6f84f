"""The FX graph a trace builds: ``GraphBuilder`` (nodes, inputs, fake propagation)."""
from .builder import GraphBuilder, GraphInput

__all__ = ["GraphBuilder", "GraphInput"]
