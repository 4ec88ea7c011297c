"""The project's one executor: one function over many tasks, in this process, in local worker processes or on a
Dask cluster (:mod:`executor.tasks`), and what a resumable batch keeps of each item: its result and its
completion record (:mod:`executor.records`). The ground floor of the layers: it imports nothing of the project, and
the aligner, the audio stages and ``punctuate`` all run their corpus-sized work through it.

    from executor import run_tasks
    outcomes = run_tasks(function, tasks, names=names, workers=4)     # or scheduler="tcp://host:8786"
"""

from executor.tasks import (
    CONNECT_TIMEOUT_S,
    Outcome,
    SchedulerUnavailable,
    available_cores,
    describe_engine,
    resolve_workers,
    run_tasks,
)

__all__ = ["CONNECT_TIMEOUT_S", "Outcome", "SchedulerUnavailable", "available_cores", "describe_engine",
           "resolve_workers", "run_tasks"]
