"""A Dask distributed ``LocalCluster`` for the tests of the parallel engines (two worker processes, no dashboard):
its scheduler address is what ``--dask`` / ``align.scheduler`` take."""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator

import pytest


@contextlib.contextmanager
def local_cluster(workers: int = 2) -> Iterator[str]:
    """Start a LocalCluster of ``workers`` single-threaded processes; yield its scheduler address."""
    pytest.importorskip("distributed", reason="dask.distributed is not installed")
    from dask.distributed import LocalCluster

    with LocalCluster(n_workers=workers, threads_per_worker=1, processes=True, dashboard_address=None,
                      silence_logs=logging.ERROR) as cluster:
        yield cluster.scheduler_address
