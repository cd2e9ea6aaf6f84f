"""Where cases run: local thread pool (``--jobs N``) or a Dask cluster (``--scheduler``).

Both paths call :func:`dynacap.harness.isolation.run_case` (which starts the
sandboxed worker subprocess) and hand each finished record to a callback in
the harness process, so results are identical whichever runs them.  With Dask
the case runs on a Dask worker; that machine must see the corpus at the same
path and have dynacap importable.  ``--scheduler local[:N]`` starts a
throw-away ``LocalCluster`` (processes).  This module must not write results
or render reports.
"""
from __future__ import annotations

import traceback
from concurrent.futures import FIRST_COMPLETED, ThreadPoolExecutor, wait
from typing import Callable

from .case import CRASH, Case, jsonable
from .isolation import kill_all, make_record, run_case


def _harness_failure(case: Case, cfg: dict, e: BaseException) -> dict:
    """Record for a case whose harness side failed (never because of user code)."""
    res = {"status": CRASH, "error": f"harness error: {type(e).__name__}: {e}",
           "traceback": "".join(traceback.format_exception(type(e), e, e.__traceback__))[-4000:]}
    return make_record(case, cfg, {"prepare": res}, None, 0.0, 0.0, 0)


def run_case_dict(case: dict, cfg: dict) -> dict:
    """Entry point shipped to Dask workers (plain dicts in and out)."""
    c = Case.from_dict(case)
    try:
        return run_case(c, cfg)
    except Exception as e:  # noqa: BLE001
        return _harness_failure(c, cfg, e)


def run_local(cases: list[Case], cfg: dict, jobs: int, on_result: Callable[[dict], None]) -> None:
    ex = ThreadPoolExecutor(max_workers=max(1, jobs), thread_name_prefix="dynacap-case")
    try:
        futs = {ex.submit(run_case, c, cfg): c for c in cases}
        pending = set(futs)
        while pending:
            done, pending = wait(pending, timeout=0.5, return_when=FIRST_COMPLETED)
            for f in done:
                try:
                    rec = f.result()
                except Exception as e:  # noqa: BLE001
                    rec = _harness_failure(futs[f], cfg, e)
                on_result(rec)
    except BaseException:
        ex.shutdown(wait=False, cancel_futures=True)
        kill_all()
        raise
    ex.shutdown(wait=True)


def _local_cluster(spec: str):
    from dask.distributed import LocalCluster
    n = 2
    if ":" in spec:
        n = int(spec.split(":", 1)[1])
    return LocalCluster(n_workers=n, threads_per_worker=1, processes=True, dashboard_address=None)


def run_dask(cases: list[Case], cfg: dict, address: str, on_result: Callable[[dict], None]) -> None:
    try:
        from dask.distributed import Client, as_completed
    except ImportError as e:  # pragma: no cover - optional extra
        raise SystemExit("--scheduler needs dask.distributed: pip install 'dask[distributed]'") from e
    cluster = None
    if address == "local" or address.startswith("local:"):
        cluster = _local_cluster(address)
        address = cluster.scheduler_address
    client = Client(address)
    try:
        futs = {}
        for c in cases:
            f = client.submit(run_case_dict, jsonable(c.to_dict()), cfg, pure=False,
                              key=f"dynacap-case-{cfg.get('run_id')}-{len(futs)}")
            futs[f] = c
        for f in as_completed(list(futs)):
            try:
                rec = f.result()
            except Exception as e:  # noqa: BLE001 - e.g. a Dask worker died
                rec = _harness_failure(futs[f], cfg, e)
            on_result(rec)
    finally:
        client.close()
        if cluster is not None:
            cluster.close()
