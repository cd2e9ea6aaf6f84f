"""Results store: the per-case JSONL file of a run, and resuming from it.

Runs in the harness process, which is the only writer of the output folder.
Every finished case is appended as one JSON line and flushed at once, so a
killed run loses at most the cases in flight; a torn last line is ignored on
reading.  ``--resume`` keeps records whose case ids and settings match and
runs the rest.  It must not run cases or render reports.
"""
from __future__ import annotations

import json
import os
import threading

RESULTS = "results.jsonl"
META = "run.json"
#: settings that must match for a previous record to count as finished.
KEY_SETTINGS = ("backend", "fullgraph", "seed")


def read_records(path: str) -> list[dict]:
    """All well-formed records, the last one winning for a repeated id."""
    by_id: dict[str, dict] = {}
    try:
        with open(path, encoding="utf-8") as f:
            for line in f:
                line = line.strip()
                if not line:
                    continue
                try:
                    rec = json.loads(line)
                except ValueError:
                    continue           # torn line of a killed run
                if isinstance(rec, dict) and "id" in rec:
                    by_id.pop(rec["id"], None)
                    by_id[rec["id"]] = rec
    except FileNotFoundError:
        pass
    return list(by_id.values())


def is_finished(rec: dict, compilers: list[str], settings: dict) -> bool:
    results = rec.get("results") or {}
    if any(c not in results or not results[c].get("status") for c in compilers):
        return False
    cfg = rec.get("config") or {}
    return all(cfg.get(k) == settings.get(k) for k in KEY_SETTINGS)


class ResultWriter:
    """Thread-safe appender of records to ``results.jsonl``."""

    def __init__(self, out_dir: str, resume: bool):
        os.makedirs(out_dir, exist_ok=True)
        self.path = os.path.join(out_dir, RESULTS)
        self._lock = threading.Lock()
        if not resume and os.path.exists(self.path):
            os.replace(self.path, self.path + ".previous")
        self._f = open(self.path, "a", encoding="utf-8")

    def write(self, rec: dict) -> None:
        line = json.dumps(rec, sort_keys=True) + "\n"
        with self._lock:
            self._f.write(line)
            self._f.flush()
            try:
                os.fsync(self._f.fileno())
            except OSError:
                pass

    def close(self) -> None:
        with self._lock:
            self._f.close()


def write_meta(out_dir: str, meta: dict) -> None:
    tmp = os.path.join(out_dir, META + ".tmp")
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump(meta, f, indent=2, sort_keys=True)
    os.replace(tmp, os.path.join(out_dir, META))
