"""Passes run on an exported program after it is built (``torch.export``'s post-trace passes, for dynacap)."""
from __future__ import annotations


def run_all(program):
    return program
