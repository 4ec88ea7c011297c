"""benchmarks/pipeline_pair.py: the data links a clone reads through, and the comparison of two arm records."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from benchmarks import pipeline_pair


def _record(commit: str, started: str, ended: str, stages: dict[str, float], repro_s: float, **extra) -> dict:
    return {"commit": commit, "machine": "AMD EPYC, 2 cores, AVX-512", "started": started, "ended": ended,
            "setup_s": 90.0, "repro_s": repro_s, "forced_stages": [], "forced_s": 0.0, "stages_s": stages,
            "stages_total_s": sum(stages.values()),
            "dvc_status_clean": True, "dvc_status": {}, "tracked_files_changed": [], **extra}


def test_a_clone_under_work_reads_the_data_the_repository_reads(tmp_path):
    repo, data = tmp_path / "home" / "repo", tmp_path / "home" / "shared" / "data"
    repo.mkdir(parents=True)
    data.mkdir(parents=True)
    (repo / "params.yaml").write_text(yaml.safe_dump({"data": {
        "iwslt_dir": "../shared/data/iwslt2011", "earnings22_dir": "../shared/data/earnings22",
        "inside": "data/local", "absolute": "/srv/corpus"}}), encoding="utf-8")
    work = tmp_path / "pair"
    links = pipeline_pair.link_outside_data(repo, work)
    assert links == [work / "shared"]
    assert (work / "shared").resolve() == (tmp_path / "home" / "shared").resolve()
    # a clone at work/before resolves ../shared/data to the repository's data
    assert (work / "before" / ".." / "shared" / "data").resolve() == data.resolve()
    assert pipeline_pair.link_outside_data(repo, work) == links  # again: the link is kept
    (work / "shared").unlink()
    (work / "shared").mkdir()
    with pytest.raises(SystemExit, match="not a link"):
        pipeline_pair.link_outside_data(repo, work)


def test_the_comparison_sets_each_stage_and_the_totals_side_by_side():
    before = _record("a" * 40, "2026-12-03T09:00:00+00:00", "2026-12-03T10:30:00+00:00",
                     {"prepare": 40.0, "train@minilm": 2000.0}, 2100.0)
    after = _record("b" * 40, "2026-12-03T10:31:00+00:00", "2026-12-03T12:10:00+00:00",
                    {"prepare": 41.0, "train@minilm": 2010.0, "evaluate_earnings22": 290.0}, 2400.0)
    table = pipeline_pair.compare_markdown(before, after)
    assert "| train@minilm | 2000 | 2010 | +10 |" in table
    assert "| evaluate_earnings22 | – | 290 | +290 |" in table      # a stage only the after arm has
    assert "| **`dvc repro`, wall** | 2100 | 2400 | +300 |" in table
    assert "| **the stages it skipped, forced after it** | 0 | 0 | +0 |" in table
    assert "stages grow by **+5.0 min** (34.0 to 39.0): +4.8 min in the stages of one arm only, +0.2 min in the 2 " \
           "stages both ran." in table
    assert "1 min after the first ended (back to back)" in table
    assert "not one machine" not in table


def test_the_stages_dvc_skipped_are_read_from_its_log_in_order():
    log = ("Running stage 'prepare':\n> python -m pipeline.prepare\nStage 'report' didn't change, skipping\n"
           "\rtrain: 100%|##| 3/3\rStage 'evaluate_real' didn't change, skipping\n")
    assert pipeline_pair.skipped_stages(log) == ["report", "evaluate_real"]
    assert pipeline_pair.skipped_stages("Running stage 'prepare':\n") == []


def test_the_comparison_says_when_the_runs_do_not_hold_as_one():
    before = _record("a" * 40, "2026-12-03T09:00:00+00:00", "2026-12-03T10:30:00+00:00", {"prepare": 40.0}, 60.0)
    after = _record("b" * 40, "2026-12-04T09:00:00+00:00", "2026-12-04T10:00:00+00:00", {"prepare": 40.0}, 60.0,
                    machine="Intel Xeon, 2 cores, no AVX-512", dvc_status_clean=False,
                    tracked_files_changed=[" M dvc.lock"])
    table = pipeline_pair.compare_markdown(before, after)
    assert "1350 min after the first ended: not back to back" in table
    assert "**not one machine**" in table
    assert "The after run: `dvc status` not clean, 1 tracked files changed:  M dvc.lock." in table
    # the gap runs from the earlier run's end, whichever arm ran first
    earlier_after = after | {"started": "2026-12-02T09:00:00+00:00", "ended": "2026-12-02T10:00:00+00:00"}
    assert "1380 min after the first ended" in pipeline_pair.compare_markdown(before, earlier_after)


def test_an_arm_keeps_its_logs_beside_its_clone_and_its_record_where_asked(tmp_path, monkeypatch):
    import subprocess

    repo = tmp_path / "repo"
    repo.mkdir()
    for command in (["git", "init", "--quiet"], ["git", "-c", "user.name=t", "-c", "user.email=t@t", "commit",
                                                 "--quiet", "--allow-empty", "-m", "one"]):
        subprocess.run(command, cwd=repo, check=True)
    ran = []

    def fake_run_timed(argv, log, *, cwd=None, env=None):  # git for real; set-up and dvc only logged
        ran.append(argv[:2])
        if argv[0] == "git":
            subprocess.run(argv, cwd=cwd, check=True)
        log.write_text("", encoding="utf-8")
        return 1.0

    monkeypatch.setattr(pipeline_pair, "run_timed", fake_run_timed)
    monkeypatch.setattr(pipeline_pair, "collect", lambda clone, **facts: {"commit": facts["commit"],
                                                                          "dvc_status_clean": True,
                                                                          "tracked_files_changed": []})
    clone, record = tmp_path / "work" / "before", tmp_path / "kept" / "records" / "before.json"
    facts = pipeline_pair.run_arm("HEAD", clone, record, repo=repo)
    assert ran == [["git", "clone"], ["git", "checkout"], ["bash", "scripts/setup.sh"], ["dvc", "repro"]]
    assert sorted(path.name for path in (tmp_path / "work" / "before_logs").iterdir()) == [
        "checkout.log", "clone.log", "dvc_repro.log", "setup.log"]
    assert not (record.parent / "before_logs").exists()
    assert json.loads(record.read_text(encoding="utf-8")) == facts
    with pytest.raises(SystemExit, match="exists: an arm starts from a fresh clone"):
        pipeline_pair.run_arm("HEAD", clone, record, repo=repo)
