"""Corpus-validation harness: run dynacap (and Dynamo) over project checkouts.

``run_corpus(CorpusOptions(paths=[...]))`` discovers ``nn.Module`` classes and
manifest cases, runs each in a sandboxed subprocess, and writes per-case JSONL
plus ``report.md`` and ``report.html``.  See ``docs/corpus.md``.  The harness
executes the projects' code in sandboxed subprocesses; this package and the
harness process must not import or run project code in-process.
"""
from .api import CorpusOptions, RunResult, run_corpus  # noqa: F401
from .case import STATUSES, Case  # noqa: F401
from .discovery import discover  # noqa: F401

__all__ = ["CorpusOptions", "RunResult", "run_corpus", "Case", "STATUSES", "discover"]
