"""dynacap: capture PyTorch programs as FX graphs while they run (PEP 523, CPython 3.11)."""
