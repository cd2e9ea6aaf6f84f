"""Builds the C frame hook (csrc/) as ``dynacap._C``; metadata is in pyproject.toml."""
from setuptools import Extension, setup

setup(
    ext_modules=[
        Extension(
            "dynacap._C",
            sources=["csrc/hook.c", "csrc/cache.c", "csrc/frame.c", "csrc/guards.c", "csrc/guard_checks.c"],
            depends=["csrc/frame.h", "csrc/cache.h", "csrc/guards.h", "csrc/guard_program.h"],
            extra_compile_args=["-O2", "-Wall", "-Wno-unused-function"],
        )
    ]
)
