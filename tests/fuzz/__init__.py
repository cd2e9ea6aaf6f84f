"""Differential program fuzzer: random programs run eagerly and under an engine, every observable compared.

``grammar``/``productions`` write a program's source from a seed; ``inputs``
makes the arguments of its three calls; ``engines`` wraps it (dynacap,
Dynamo, eager); ``runner`` runs it and snapshots what it did; ``classify``
names the failure class; ``batch`` runs many seeds in subprocesses (so a
crash or a hang is a class, not the end of the run); ``minimize`` shrinks a
failing program.  ``tests/test_fuzz.py`` is the CI-sized run,
``benchmarks/fuzz.py`` the long one.  This package never changes dynacap.
"""
