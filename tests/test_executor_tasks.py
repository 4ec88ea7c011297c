"""executor.tasks: one function over many tasks, here, in local processes or on a Dask cluster; outcomes in task
order, one task's error never stops the others."""

from __future__ import annotations

import os

import pytest

from executor.tasks import Outcome, available_cores, describe_engine, resolve_workers, run_tasks
from experiments.numerics import regime_facts
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


# ----------------------------------------------------------------------------- numeric regime


def set_environment(key: str, value: str | None) -> None:
    """Run in a Dask worker: set (or, for None, remove) one variable of its environment."""
    if value is None:
        os.environ.pop(key, None)
    else:
        os.environ[key] = value


def client_or_other() -> dict[str, str]:
    """A regime that tells the test's own process (its pid in TEST_CLIENT_PID) from every other one."""
    return {"regime": "client" if os.environ.get("TEST_CLIENT_PID") == str(os.getpid()) else "other"}


def test_workers_in_the_clients_regime_run_every_task(scheduler):
    for options in ({"workers": 2}, {"scheduler": scheduler}):
        check(run_tasks(square_or_fail, range(6), names=NAMES, regime=regime_facts, **options))


def test_a_dask_worker_in_another_regime_refuses_its_tasks_naming_itself_and_the_switch(scheduler):
    """A worker started without the pinned environment (here: told OpenBLAS's SkylakeX kernels after it started)
    runs none of its tasks: each is an error naming the worker and the switch, and nothing of two regimes mixes."""
    from dask.distributed import Client

    here = os.environ.get("OPENBLAS_CORETYPE")
    with Client(scheduler, set_as_default=False) as client:
        workers = sorted(client.scheduler_info()["workers"])
        client.run(set_environment, "OPENBLAS_CORETYPE", "SkylakeX")
        try:
            outcomes = run_tasks(square_or_fail, range(6), names=NAMES, scheduler=scheduler, regime=regime_facts)
        finally:
            client.run(set_environment, "OPENBLAS_CORETYPE", here)
    assert not any(outcome.ok for outcome in outcomes)
    for outcome in outcomes:
        assert outcome.error.startswith("RegimeMismatch: Dask worker "), outcome.error
        assert any(f"Dask worker {worker}" in outcome.error for worker in workers), outcome.error
        assert f"OPENBLAS_CORETYPE is 'SkylakeX' there, {here!r} here" in outcome.error
        assert "regime is " in outcome.error  # the pinned floor here, 'native:...' there
    assert run_tasks(square_or_fail, [2], scheduler=scheduler, regime=regime_facts)[0].value[0] == 4  # restored


def test_a_local_worker_in_another_regime_refuses_its_tasks(monkeypatch):
    monkeypatch.setenv("TEST_CLIENT_PID", str(os.getpid()))
    outcomes = run_tasks(square_or_fail, range(4), workers=2, regime=client_or_other)
    assert [outcome.ok for outcome in outcomes] == [False] * 4
    assert all(outcome.error.startswith("RegimeMismatch: worker process ") and
               "regime is 'other' there, 'client' here" in outcome.error for outcome in outcomes)
    assert run_tasks(square_or_fail, range(2), workers=1, regime=client_or_other)[1].value[0] == 1  # here: itself
