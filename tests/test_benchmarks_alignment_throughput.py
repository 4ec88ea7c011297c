"""``python -m benchmarks.alignment_throughput --tiny``: the throughput benchmark runs the align and features stages
with 1 and 2 workers on flite talks and prints (and writes) throughput, the speed-up and the 452 h projection. Only
that it works is checked: the figures of a tiny run on a shared machine mean nothing."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from audio.reference_speech import flite_available

REPO = Path(__file__).resolve().parents[1]
pytestmark = [pytest.mark.skipif(not flite_available(), reason="flite is not installed (apt-get install flite)"),
              pytest.mark.slow]  # synthesis, and both stages twice with fresh worker processes: ~20 s


def test_the_tiny_benchmark_reports_throughput_speedup_and_projection(tmp_path):
    pytest.importorskip("pocketsphinx")
    pytest.importorskip("librosa")
    # its own process: flite's voices keep state between calls (audio/engines.py), which would change what later
    # tests in this process synthesise
    done = subprocess.run([sys.executable, "-m", "benchmarks.alignment_throughput", "--tiny", "--json",
                           str(tmp_path / "r.json"), "--markdown", str(tmp_path / "r.md"), "--keep",
                           str(tmp_path / "work")], cwd=REPO, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    out = done.stdout
    result = json.loads((tmp_path / "r.json").read_text())
    assert json.loads(out.strip().splitlines()[-1]) == result
    assert result["tiny"] is True and result["material"]["talks"] == 2 and result["material"]["audio_minutes"] > 0.2
    for stage in ("align", "features"):
        for workers in ("1", "2"):
            row = result[stage][workers]
            assert row["wall_s"] > 0 and row["cpu_s"] > 0 and row["audio_minutes_per_cpu_s"] > 0
        assert result[stage]["2"]["startup_s"] > 0
        assert result["speedup_1_to_2"][stage]["raw"] > 0 and result["speedup_1_to_2"][stage]["steady"] > 0
    projection = result["projection"]
    assert projection["hours_of_audio"] == 452 and set(projection["wall_hours"]) == {"1", "16", "64"}
    assert projection["wall_hours"]["1"] == pytest.approx(projection["cpu_hours"]["total"], rel=0.01)
    assert projection["wall_hours"]["64"] < projection["wall_hours"]["16"] < projection["wall_hours"]["1"]
    assert projection["wall_hours_ideal"]["64"] == pytest.approx(projection["cpu_hours"]["total"] / 64, rel=0.02)
    text = (tmp_path / "r.md").read_text()
    assert "audio min per CPU s" in text and "Speed-up from 1 to 2 workers" in text and "| 64 |" in text
    # the stages' outputs are there: the features stage read the 1-worker alignments
    assert (tmp_path / "work" / "runs" / "features-w2" / "acoustic" / "train" / "features.npy").is_file()


def test_the_baseline_of_one_worker_is_required():
    from benchmarks import alignment_throughput

    with pytest.raises(SystemExit):
        alignment_throughput.main(["--tiny", "--workers", "2"])
