"""executor.tasks: one function over many tasks, here, in local processes or on a Dask cluster; outcomes in task
order, one task's error never stops the others."""

from __future__ import annotations

import os

import pytest

from executor.tasks import Outcome, available_cores, describe_engine, resolve_workers, run_tasks
from tests.fixture_dask import local_cluster


def square_or_fail(value: int) -> tuple[int, int]:
    """The square and the process it was computed in; 3 fails."""
    if value == 3:
        raise ValueError("three is not allowed\nsecond line")
    return value * value, os.getpid()


@pytest.fixture(scope="module")
def scheduler():
    with local_cluster() as address:
        yield address


def crash_on_two(value: int) -> int:
    """Kills its own worker process for 2 (as a crash in native code would)."""
    if value == 2:
        os._exit(1)
    return value


def check(outcomes: list[Outcome]) -> set[int]:
    assert [outcome.name for outcome in outcomes] == [f"task-{n}" for n in range(6)]
    assert [outcome.ok for outcome in outcomes] == [True, True, True, False, True, True]
    assert [outcome.value[0] for outcome in outcomes if outcome.ok] == [0, 1, 4, 16, 25]
    assert outcomes[3].error == "ValueError: three is not allowed | second line" and outcomes[3].value is None
    return {outcome.value[1] for outcome in outcomes if outcome.ok}


NAMES = [f"task-{n}" for n in range(6)]


def test_one_worker_runs_every_task_here_in_order():
    pids = check(run_tasks(square_or_fail, range(6), names=NAMES, workers=1))
    assert pids == {os.getpid()}


def test_local_processes_give_the_same_outcomes_in_task_order():
    pids = check(run_tasks(square_or_fail, range(6), names=NAMES, workers=2, progress=True))
    assert os.getpid() not in pids and 1 <= len(pids) <= 2


def test_a_dask_scheduler_gives_the_same_outcomes(scheduler):
    pids = check(run_tasks(square_or_fail, range(6), names=NAMES, scheduler=scheduler, workers=1))
    assert os.getpid() not in pids  # the cluster's workers, whatever `workers` says


def test_worker_counts_and_engines_in_words():
    assert resolve_workers(None) == available_cores() >= 1
    assert resolve_workers(3) == 3
    for bad in (0, -1, 1.5, True):
        with pytest.raises(ValueError, match="workers must be a positive integer"):
            resolve_workers(bad)
    assert describe_engine(1, None) == "this process"
    assert describe_engine(4, None) == "4 local processes"
    assert describe_engine(4, "tcp://h:8786") == "dask scheduler tcp://h:8786"
    assert run_tasks(square_or_fail, [], workers=4) == []
    with pytest.raises(ValueError, match="2 names for 3 tasks"):
        run_tasks(square_or_fail, [1, 2, 4], names=["a", "b"])


def test_a_task_that_kills_its_worker_fails_alone():
    outcomes = run_tasks(crash_on_two, range(6), names=NAMES, workers=2)
    assert [outcome.ok for outcome in outcomes] == [True, True, False, True, True, True]
    assert [outcome.value for outcome in outcomes] == [0, 1, None, 3, 4, 5]
    assert outcomes[2].name == "task-2" and outcomes[2].error.startswith("BrokenProcessPool: ")


@pytest.mark.parametrize("engine", ["here", "processes", "dask"])
def test_the_caller_hears_of_each_task_as_it_finishes(engine, request):
    heard: list[tuple[int, bool]] = []
    options = {"here": {"workers": 1}, "processes": {"workers": 2}}.get(engine) or \
        {"scheduler": request.getfixturevalue("scheduler")}
    outcomes = run_tasks(square_or_fail, range(6), names=NAMES, on_outcome=lambda i, o: heard.append((i, o.ok)),
                         **options)
    assert sorted(heard) == [(index, outcome.ok) for index, outcome in enumerate(outcomes)]
    if engine == "here":
        assert [index for index, _ in heard] == list(range(6))  # in order, here
