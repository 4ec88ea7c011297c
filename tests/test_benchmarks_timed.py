"""benchmarks/timed.py: a benchmark's command, its output in a log, a failure naming the log."""

from __future__ import annotations

import sys

import pytest

from benchmarks.timed import run_timed


def test_a_command_runs_in_its_folder_and_its_output_goes_to_the_log(tmp_path):
    log = tmp_path / "step.log"
    seconds = run_timed([sys.executable, "-c", "import os; print(os.getcwd())"], log, cwd=tmp_path)
    assert seconds > 0
    assert log.read_text(encoding="utf-8").strip() == str(tmp_path)


def test_a_failing_command_stops_the_benchmark_naming_its_folder_and_log(tmp_path):
    log = tmp_path / "step.log"
    with pytest.raises(SystemExit, match=rf"\(in {tmp_path}\) exited with 3: see {log}"):
        run_timed([sys.executable, "-c", "import sys; print('broken'); sys.exit(3)"], log, cwd=tmp_path)
    assert log.read_text(encoding="utf-8").strip() == "broken"
    with pytest.raises(SystemExit, match=r"-c import sys; sys.exit\(2\) exited with 2"):  # no folder given
        run_timed([sys.executable, "-c", "import sys; sys.exit(2)"], log)
