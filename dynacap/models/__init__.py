"""Pure-Python models of library functions, traced in their place (``trace_rules``' ``MODEL`` rules).

Each model does what the real function does to the values a graph can hold,
written so the interpreter can trace it; one file per library family.  Models
never run outside tracing, and import nothing of the engine.
"""
