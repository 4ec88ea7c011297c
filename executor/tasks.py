"""Running one function over many tasks: in this process, in local worker processes, or on a Dask cluster.

The one executor of the project for corpus-sized work: ``python -m aligner batch``, the ``align`` and ``features``
stages (:mod:`audio.align_stage`, :mod:`audio.features_stage`) and ``punctuate`` over a folder
(:mod:`inference.batch`) all go through :func:`run_tasks`. It knows nothing of talks or transcripts: it sits on
the ground floor of the layers (docs/architecture.md), beside :mod:`corpus`, so that any package may use it.

    outcomes = run_tasks(align_one, tasks, names=[t.name for t in tasks], workers=4)           # local processes
    outcomes = run_tasks(align_one, tasks, names=..., scheduler="tcp://10.0.0.5:8786")         # a Dask cluster

* ``workers=1`` runs every task here, in order (no process is started); ``workers=N`` (N > 1) in a pool of N
  local processes (:class:`concurrent.futures.ProcessPoolExecutor`, started with ``spawn``: no state of this
  process leaks into a worker); ``workers=None`` uses every core this process may run on. A worker process (a
  pool's or a Dask worker) lives for many tasks, so a task may keep what is costly to make (a loaded model) in
  a module-level cache and pay for it once per process.
* ``scheduler``: the address of a Dask distributed scheduler (``dask.distributed.Client(scheduler)``; start one
  with ``dask scheduler`` and ``dask worker ADDRESS`` on each machine, or ``LocalCluster``). ``workers`` is
  then ignored: the cluster has its own. The function is sent by reference, so the workers must be able to
  import this project (``pip install -e .`` there), and every path in a task must mean the same file on every
  worker (a shared file system).
* Whatever the engine, each outcome comes back in the order of ``tasks`` (:class:`Outcome`: the value, or the
  error as one line naming the task), and an exception in one task never stops the others -- nor does a task that
  kills its worker process: the tasks its broken pool took down are run again, and only that one fails (Dask
  retries a task whose worker died and gives up with ``KilledWorker``).
* Worker processes start with ``spawn``: they import the main module again, so a script that calls this with
  ``workers > 1`` must keep its work under ``if __name__ == "__main__":`` (the project's commands do). The work itself
  must not depend on which worker runs it, nor on the order; then the results are the same, byte for byte,
  whatever the engine and the worker count (the tests check it for the aligner, the feature stage and
  ``punctuate``).
* ``progress``: a tqdm bar over the tasks, advanced as each one finishes (``unit`` names what a task is);
  ``on_outcome(index, outcome)``: called here, in this process, as each task finishes (in the order they
  finish), for a caller that keeps its own account (a bar over words, a log).
* ``regime``: a module-level function that tells a process's numeric regime as plain values (the project's is
  ``experiments.numerics.regime_facts``: the regime and the switches that choose the numeric kernels). In a
  worker process each task calls it first and compares it with this process's: a worker in another regime (a
  Dask worker started without the pinned environment) refuses the task with a :class:`RegimeMismatch` naming the
  worker and each value that differs, before the task writes anything, so that outputs of two regimes never mix.
"""

from __future__ import annotations

import functools
import multiprocessing
import os
import platform
import sys
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

__all__ = ["CONNECT_TIMEOUT_S", "Outcome", "RegimeMismatch", "SchedulerUnavailable", "available_cores",
           "describe_engine", "resolve_workers", "run_tasks"]

#: How long to try reaching a Dask scheduler before giving up (seconds).
CONNECT_TIMEOUT_S = 20.0


class SchedulerUnavailable(RuntimeError):
    """The Dask scheduler named could not be reached (the message names its address)."""


class RegimeMismatch(RuntimeError):
    """A worker computes in another numeric regime than the process that gave it the task (the message names the
    worker and each value that differs): its outputs would not be the same bytes."""


@dataclass(frozen=True)
class Outcome:
    """What one task gave: ``value`` when it returned, else ``error`` (one line, ``Type: message``)."""

    name: str
    value: Any = None
    error: str | None = None

    @property
    def ok(self) -> bool:
        return self.error is None


def available_cores() -> int:
    """The number of cores this process may run on (its CPU affinity where the OS tells; at least 1)."""
    if hasattr(os, "process_cpu_count"):  # Python >= 3.13
        count = os.process_cpu_count()
    elif hasattr(os, "sched_getaffinity"):
        count = len(os.sched_getaffinity(0))
    else:  # pragma: no cover - macOS, Windows
        count = os.cpu_count()
    return max(1, int(count or 1))


def resolve_workers(workers: int | None) -> int:
    """``workers`` as a count: None -> :func:`available_cores`; refuses anything below 1."""
    if workers is None:
        return available_cores()
    if isinstance(workers, bool) or not isinstance(workers, int) or workers < 1:
        raise ValueError(f"workers must be a positive integer or None (every core), not {workers!r}")
    return workers


def describe_engine(workers: int | None, scheduler: str | None) -> str:
    """How :func:`run_tasks` will run, in words (for reports)."""
    if scheduler:
        return f"dask scheduler {scheduler}"
    count = resolve_workers(workers)
    return "this process" if count == 1 else f"{count} local processes"


def _error_line(error: BaseException) -> str:
    return f"{type(error).__name__}: {error}".replace("\t", " ").replace("\r", " ").replace("\n", " | ")


def _progress(total: int, enabled: bool, desc: str, unit: str):  # noqa: ANN202
    if not enabled:
        return None
    from tqdm import tqdm

    return tqdm(total=total, desc=desc, unit=unit, file=sys.stderr)


class _Account:
    """What happens as each task finishes: the progress bar advances and the caller's ``on_outcome`` hears of it."""

    def __init__(self, total: int, progress: bool, desc: str, unit: str,
                 on_outcome: Callable[[int, Outcome], None] | None):
        self.bar = _progress(total, progress, desc, unit)
        self.on_outcome = on_outcome

    def finished(self, index: int, outcome: Outcome) -> None:
        if self.on_outcome is not None:
            self.on_outcome(index, outcome)
        if self.bar is not None:
            self.bar.update(1)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()


def run_tasks(
    function: Callable[[Any], Any],
    tasks: Sequence[Any],
    *,
    names: Sequence[str] | None = None,
    workers: int | None = 1,
    scheduler: str | None = None,
    progress: bool = False,
    desc: str = "talks",
    unit: str = "talk",
    on_outcome: Callable[[int, Outcome], None] | None = None,
    regime: Callable[[], Mapping[str, Any]] | None = None,
) -> list[Outcome]:
    """``function(task)`` for every task; one :class:`Outcome` per task, in the order of ``tasks``.

    ``function`` must be a module-level function and each task picklable (they travel to other processes);
    ``names`` (default: the task's position) name the tasks in errors and in Dask's task keys; ``on_outcome``
    and ``regime`` (None: not checked): see the module docstring.
    """
    tasks = list(tasks)
    names = [str(name) for name in names] if names is not None else [str(index) for index in range(len(tasks))]
    if len(names) != len(tasks):
        raise ValueError(f"{len(names)} names for {len(tasks)} tasks")
    if not tasks:
        return []
    if regime is not None and (scheduler or min(resolve_workers(workers), len(tasks)) > 1):
        function = functools.partial(_in_regime, function, regime, dict(regime()))  # this process's, to each worker
    if scheduler:
        return _run_dask(function, tasks, names, scheduler, _Account(len(tasks), progress, desc, unit, on_outcome),
                         desc)
    count = min(resolve_workers(workers), len(tasks))
    account = _Account(len(tasks), progress, desc, unit, on_outcome)
    try:
        if count == 1:
            return _run_here(function, tasks, names, account)
        return _run_processes(function, tasks, names, count, account)
    finally:
        account.close()


def _in_regime(function: Callable[[Any], Any], regime: Callable[[], Mapping[str, Any]], expected: dict[str, Any],
               task: Any) -> Any:
    """``function(task)`` in a worker whose ``regime()`` is ``expected`` (the client's); else a :class:`RegimeMismatch`
    before the task runs."""
    found = dict(regime())
    differing = [key for key in sorted(set(found) | set(expected)) if found.get(key) != expected.get(key)]
    if differing:
        raise RegimeMismatch(f"{_worker_name()} computes in another numeric regime than the client: " + "; ".join(
            f"{key} is {found.get(key)!r} there, {expected.get(key)!r} here" for key in differing) +
            " -- start the worker with the client's environment")
    return function(task)


def _worker_name() -> str:
    """This worker process, as an error names it: a Dask worker's address, else the machine and process id."""
    if "distributed" in sys.modules:  # a Dask worker has it loaded
        try:
            from distributed import get_worker

            worker = get_worker()
            return f"Dask worker {worker.address}" + (f" ({worker.name})" if str(worker.name) != worker.address else "")
        except (ImportError, ValueError):  # not in a Dask worker after all
            pass
    return f"worker process {os.getpid()} on {platform.node()}"


def _run_here(function, tasks, names, account: _Account) -> list[Outcome]:  # noqa: ANN001
    outcomes = []
    for index, (name, task) in enumerate(zip(names, tasks)):
        try:
            outcomes.append(Outcome(name, value=function(task)))
        except Exception as error:  # noqa: BLE001 -- recorded per task, the others carry on
            outcomes.append(Outcome(name, error=_error_line(error)))
        account.finished(index, outcomes[-1])
    return outcomes


def _run_processes(function, tasks, names, count, account: _Account) -> list[Outcome]:  # noqa: ANN001
    from concurrent.futures.process import BrokenProcessPool

    results: dict[int, Outcome] = {}
    pending = list(range(len(tasks)))
    # A worker that dies (a crash in native code, killed for memory) breaks the whole pool, and every task
    # still in it fails with it: those are run again in a fresh pool, and when a round makes no progress,
    # each alone, so that only the task that kills its worker fails.
    while pending:
        broken = _pool_round(function, tasks, names, pending, count, results, account)
        if not broken:
            break
        if len(broken) == len(pending):
            for index in broken:
                retry = _pool_round(function, tasks, names, [index], 1, results, account)
                if retry:
                    results[index] = Outcome(names[index], error=f"{BrokenProcessPool.__name__}: {retry[index]}")
                    account.finished(index, results[index])
            break
        pending = sorted(broken)
    return [results[index] for index in range(len(tasks))]


def _pool_round(function, tasks, names, indices, count, results, account: _Account) -> dict[int, str]:  # noqa: ANN001
    """Run ``tasks[indices]`` in a fresh pool of ``count`` processes into ``results``; the tasks lost to a broken
    pool (index -> message) are left out of ``results`` for the caller to run again."""
    from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait
    from concurrent.futures.process import BrokenProcessPool

    broken: dict[int, str] = {}
    pool = ProcessPoolExecutor(max_workers=min(count, len(indices)), mp_context=multiprocessing.get_context("spawn"))
    try:
        pending = {pool.submit(function, tasks[index]): index for index in indices}
        while pending:
            done, _ = wait(pending, return_when=FIRST_COMPLETED)
            for future in done:
                index = pending.pop(future)
                try:
                    results[index] = Outcome(names[index], value=future.result())
                except BrokenProcessPool as error:
                    broken[index] = str(error) or "a worker process died"
                    continue
                except Exception as error:  # noqa: BLE001 -- recorded per task, the others carry on
                    results[index] = Outcome(names[index], error=_error_line(error))
                account.finished(index, results[index])
    finally:
        pool.shutdown(wait=True, cancel_futures=True)
    return broken


def _run_dask(function, tasks, names, scheduler, account: _Account, desc) -> list[Outcome]:  # noqa: ANN001
    try:
        from dask.distributed import Client, as_completed
    except ImportError as error:  # pragma: no cover - dask is a pinned dependency
        account.close()
        raise RuntimeError("a Dask scheduler was given but dask.distributed is not installed "
                           "(pip install dask distributed)") from error

    results: dict[int, Outcome] = {}
    run = uuid.uuid4().hex[:8]
    try:
        client = Client(scheduler, set_as_default=False, timeout=CONNECT_TIMEOUT_S)
    except (OSError, TimeoutError, ValueError) as error:
        account.close()
        raise SchedulerUnavailable(f"cannot reach the Dask scheduler at {scheduler!r} within {CONNECT_TIMEOUT_S:g} s: "
                                   f"{error}") from error
    try:
        futures = {}
        for index, (name, task) in enumerate(zip(names, tasks)):
            key = f"{desc}-{run}-{index}-{name}".replace(" ", "_")
            futures[client.submit(function, task, key=key, pure=False)] = index
        for future in as_completed(list(futures), loop=client.loop):
            index = futures[future]
            try:
                results[index] = Outcome(names[index], value=future.result())
            except Exception as error:  # noqa: BLE001 -- a task's error, or KilledWorker
                results[index] = Outcome(names[index], error=_error_line(error))
            future.release()
            account.finished(index, results[index])
    finally:
        client.close()
        account.close()
    return [results[index] for index in range(len(tasks))]
