from .model import TinyNet  # noqa: F401
