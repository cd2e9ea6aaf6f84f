"""Compiled autograd internals: what the autograd engine drives at backward time.

``capture.py`` is the compiler instance torch's C++ engine calls while it walks
a backward graph (it records one FX graph of the whole backward on fake
tensors); ``program.py`` runs that graph: pure stretches compiled by the
backend, hooks and ``AccumulateGrad`` run as they are, in the engine's order.
The user-facing switch is ``dynacap.compiled_autograd``.  Nothing here reads
frames or bytecode.
"""
