"""The README's result table is the pipeline's: generated from metrics/, never typed."""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from experiments.numerics import NATIVE_SWITCH, numeric_facts
from experiments.params import load_params
from pipeline.report import main as report_main
from pipeline.report import summary_text, write_readme
from pipeline.verify import committed_metrics, committed_reader, git, run_regime, verify_run
from reporting.results import (
    EARNINGS22_END,
    EARNINGS22_START,
    REAL_SPEECH_END,
    REAL_SPEECH_HEADING,
    REAL_SPEECH_START,
    markdown_table_after,
    marked_region,
    replace_marked_region,
)
from reporting.verify import EXACT, SPREAD, SPREAD_FILE, numerics_regime

REPO = Path(__file__).resolve().parents[1]
REGENERATE = "run `python -m pipeline.report --summary-only --readme README.md` after `dvc repro`"


def scores(f1: float) -> dict:
    cls = {"precision": f1, "recall": f1, "f1": f1}
    return {"COMMA": cls, "PERIOD": cls, "QUESTION": cls, "OVERALL": cls, "SER": 1 - f1}


def write(path: Path, value) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(value))


# ---------------------------------------------------------------------------- exact pinned, seed spread elsewhere


def readme_regime(repo: Path = REPO) -> str:
    """Exact where the run computed the committed bytes (Linux, the committed floor, models trained on the CPU:
    the README's figures are then this run's to the last bit); the seed spread elsewhere (python -m
    pipeline.verify)."""
    return run_regime(repo)[0]


def committed_text(repo: Path, path: str) -> str:
    text = git(repo, "show", f"HEAD:{path}")
    if text is None:
        pytest.skip(f"no {path} at HEAD (not a git checkout?): the committed figures cannot be read")
    return text


def within_spread(repo: Path) -> str | None:
    """None where this run's README figures lie within their seed spread of the committed ones; else verify's
    report, naming each figure outside."""
    report = verify_run(repo, "HEAD", SPREAD)
    return None if report.ok else report.text()


def results_region_problem(repo: Path, params: dict, regime: str) -> str | None:
    """What is wrong with the README's results region (None: nothing). It must be the table of the metrics in
    the working tree; off the pinned machine it may instead be the committed metrics' table, if this run's
    figures lie within their seed spread of the committed ones."""
    shown = marked_region((repo / "README.md").read_text(encoding="utf-8"))
    if shown == summary_text(params, repo / "metrics"):
        return None
    if regime == EXACT:
        return f"README.md's results region is not the table of the metrics: {REGENERATE}"
    committed_text(repo, "dvc.lock")
    read = committed_reader(repo, "HEAD")
    with tempfile.TemporaryDirectory() as scratch:
        for path in committed_metrics(repo, "HEAD"):
            (Path(scratch) / path).parent.mkdir(parents=True, exist_ok=True)
            (Path(scratch) / path).write_text(read(path), encoding="utf-8")
        committed = summary_text(params, Path(scratch) / "metrics")
    if shown != committed:
        return f"README.md's results region is neither this run's table nor the committed one: {REGENERATE}"
    return within_spread(repo)


def real_speech_region_problem(repo: Path, regime: str, *, report_path: str = "reports/real_speech.md",
                               start: str = REAL_SPEECH_START, end: str = REAL_SPEECH_END,
                               stage: str = "evaluate_real") -> str | None:
    """What is wrong with the README's real-speech region (None: nothing): as :func:`results_region_problem`,
    against the "All talks" table of the evaluate_real stage's report (or of another stage's, between other
    markers: evaluate_earnings22's)."""
    shown = marked_region((repo / "README.md").read_text(encoding="utf-8"), start=start, end=end)
    report = (repo / report_path).read_text(encoding="utf-8")
    if shown == markdown_table_after(report, REAL_SPEECH_HEADING) + "\n":
        return None
    if regime == EXACT:
        return f"README.md's region {start} is not {stage}'s table ({report_path}): {REGENERATE}"
    committed = markdown_table_after(committed_text(repo, report_path), REAL_SPEECH_HEADING)
    if shown != committed + "\n":
        return (f"README.md's region {start} is neither this run's table of {report_path} nor the committed one: "
                f"{REGENERATE}")
    return within_spread(repo)


def test_the_readme_shows_the_metrics_of_the_default_pipeline():
    """Fails when README.md's marked region differs from what the metrics give (on the pinned machine; elsewhere
    it may show the committed figures while this run's lie within their seed spread): run
    `python -m pipeline.report --summary-only --readme README.md` after `dvc repro`."""
    params = load_params(REPO / "params.yaml")
    try:
        expected = summary_text(params, REPO / "metrics")
    except FileNotFoundError as missing:  # the default pipeline has not run since it changed
        pytest.skip(f"the default pipeline's metrics are not all there yet: {missing}")
    problem = results_region_problem(REPO, params, readme_regime())
    assert problem is None, problem
    assert (REPO / "reports" / "summary.md").read_text(encoding="utf-8") == expected  # the report stage's own


def test_the_readme_shows_the_real_speech_table_that_evaluate_real_wrote():
    """The README's real-speech region is the `evaluate_real` stage's "All talks" table, row for row (on the
    pinned machine; elsewhere as above): run `python -m pipeline.report --summary-only --readme README.md` after
    `dvc repro`."""
    if not (REPO / "reports" / "real_speech.md").exists():
        pytest.skip("the default pipeline's evaluate_real has not run")
    problem = real_speech_region_problem(REPO, readme_regime())
    assert problem is None, problem


def test_the_readme_shows_the_earnings22_table_that_evaluate_earnings22_wrote():
    """The README's Earnings-22 region is the `evaluate_earnings22` stage's "All talks" table, row for row (on the
    pinned machine; elsewhere as above), and it is not empty once the stage has run."""
    if not (REPO / "reports" / "earnings22_test.md").exists():
        pytest.skip("the default pipeline's evaluate_earnings22 has not run")
    problem = real_speech_region_problem(REPO, readme_regime(), report_path="reports/earnings22_test.md",
                                         start=EARNINGS22_START, end=EARNINGS22_END, stage="evaluate_earnings22")
    assert problem is None, problem
    assert "text + real timings" in marked_region((REPO / "README.md").read_text(encoding="utf-8"),
                                                  start=EARNINGS22_START, end=EARNINGS22_END)


def test_the_readme_tests_are_exact_on_the_pinned_machine_and_use_the_spread_elsewhere(monkeypatch):
    monkeypatch.setenv(NATIVE_SWITCH, "1")
    assert readme_regime() == SPREAD
    monkeypatch.delenv(NATIVE_SWITCH)
    regime, why = numerics_regime(numeric_facts(), system=sys.platform)
    if regime != EXACT:
        pytest.skip(f"this machine does not compute the committed bytes: {why}")
    assert readme_regime(Path("/nonexistent")) == EXACT


def committed_repo(root: Path, params: dict) -> Path:
    """A tiny repository whose README shows its committed metrics (the BLSTM's scores and real speech), and the
    tolerances of its figures."""
    write(root / "metrics" / "eval" / "blstm.json", {"ref": scores(0.53), "asr": scores(0.49)})
    write(root / "metrics" / "train" / "blstm.json", {"steps": 120})
    write(root / "metrics" / "real_speech.json", {"models": {"blstm_text": {"text": {"all": scores(0.54)}}}})
    (root / "dvc.lock").write_text("stages:\n  evaluate@blstm:\n    outs:\n    - path: metrics/eval/blstm.json\n"
                                   "  train@blstm:\n    outs:\n    - path: metrics/train/blstm.json\n"
                                   "  evaluate_real:\n    outs:\n    - path: metrics/real_speech.json\n")
    write(root / SPREAD_FILE, {"default": {"tolerance": 2.0}, "figures": {}})
    report = f"# Real speech\n\n{REAL_SPEECH_HEADING}\n\n| model | F1 |\n|---|---|\n| blstm_text | 54.0 |\n"
    (root / "reports" / "real_speech.md").write_text(report)
    (root / "README.md").write_text("# T\n<!-- results:start -->\n<!-- results:end -->\n"
                                    f"{REAL_SPEECH_START}\n{REAL_SPEECH_END}\n")
    write_readme(root / "README.md", summary_text(params, root / "metrics"), root / "reports" / "real_speech.md")
    for command in (["init", "-q"], ["add", "."], ["commit", "-q", "-m", "committed"]):
        subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@example.org", *command], cwd=root,
                       check=True, capture_output=True)
    return root


def test_off_the_pinned_machine_the_readme_shows_the_committed_figures_within_their_spread(tmp_path):
    params = {"profile": "small", "experiments": ["blstm"], "variants": {},
              "active": {"experiments": {"blstm": {}}}}
    repo = committed_repo(tmp_path, params)
    assert results_region_problem(repo, params, EXACT) is None
    assert real_speech_region_problem(repo, EXACT) is None
    # an unpinned run: its own bytes, one point off on IWSLT and real speech, its report rewritten
    write(repo / "metrics" / "eval" / "blstm.json", {"ref": scores(0.54), "asr": scores(0.49)})
    write(repo / "metrics" / "real_speech.json", {"models": {"blstm_text": {"text": {"all": scores(0.55)}}}})
    (repo / "reports" / "real_speech.md").write_text(f"{REAL_SPEECH_HEADING}\n\n| model | F1 |\n|---|---|\n"
                                                     "| blstm_text | 55.0 |\n")
    assert "not the table of the metrics" in results_region_problem(repo, params, EXACT)
    assert "not evaluate_real's table" in real_speech_region_problem(repo, EXACT)
    assert results_region_problem(repo, params, SPREAD) is None
    assert real_speech_region_problem(repo, SPREAD) is None
    # three points off: outside the (default) tolerance of two, named
    write(repo / "metrics" / "eval" / "blstm.json", {"ref": scores(0.56), "asr": scores(0.49)})
    problem = results_region_problem(repo, params, SPREAD)
    assert "metrics/eval/blstm.json ref.OVERALL.f1: committed 53.00, run 56.00" in problem
    assert "tolerance 2.00 points (default)" in problem
    # a README that is neither this run's nor the committed table
    (repo / "README.md").write_text((repo / "README.md").read_text().replace("53.0", "50.0"))
    assert "neither this run's table nor the committed one" in results_region_problem(repo, params, SPREAD)


def test_markdown_table_after_takes_the_first_table_after_the_heading():
    text = "| a |\n\n## H\n\nsome text\n\n| x | y |\n|---|---|\n| 1 | 2 |\n\nafter\n| z |\n"
    assert markdown_table_after(text, "## H") == "| x | y |\n|---|---|\n| 1 | 2 |"
    with pytest.raises(ValueError, match="report.md: no table after a line '## Other'"):
        markdown_table_after(text, "## Other", where="report.md")
    with pytest.raises(ValueError, match="no table after"):
        markdown_table_after("## H\nno table\n", "## H")
    # the heading is a whole line: a line that merely contains it is not the heading
    assert markdown_table_after("## Hx\n| no |\n## H\n| yes |\n", "## H") == "| yes |"


def test_write_readme_fills_both_regions_and_keeps_the_rest(tmp_path):
    readme = tmp_path / "README.md"
    readme.write_text("# T\n<!-- results:start -->\nold\n<!-- results:end -->\nprose\n"
                      f"{REAL_SPEECH_START}\n| old |\n{REAL_SPEECH_END}\ntail\n", encoding="utf-8")
    report = tmp_path / "real_speech.md"
    report.write_text(f"# Real speech\n\n{REAL_SPEECH_HEADING}\n\n| m | F1 |\n|---|---|\n| a | 1.0 |\n\n"
                      "## `talk`\n\n| m | F1 |\n|---|---|\n| a | 9.9 |\n", encoding="utf-8")
    write_readme(readme, "| summary |\n", report)
    assert readme.read_text(encoding="utf-8") == (
        "# T\n<!-- results:start -->\n| summary |\n<!-- results:end -->\nprose\n"
        f"{REAL_SPEECH_START}\n| m | F1 |\n|---|---|\n| a | 1.0 |\n{REAL_SPEECH_END}\ntail\n")
    # no report yet (evaluate_real has not run): the summary alone, the real-speech region as it was
    readme.write_text(f"<!-- results:start -->\n<!-- results:end -->\n{REAL_SPEECH_START}\n| old |\n"
                      f"{REAL_SPEECH_END}\n", encoding="utf-8")
    write_readme(readme, "| new |", tmp_path / "missing.md")
    assert readme.read_text(encoding="utf-8") == (
        f"<!-- results:start -->\n| new |\n<!-- results:end -->\n{REAL_SPEECH_START}\n| old |\n{REAL_SPEECH_END}\n")
    # a README without the real-speech region is an error naming it, and is left as it was
    readme.write_text("<!-- results:start -->\n<!-- results:end -->\n", encoding="utf-8")
    with pytest.raises(ValueError, match="README.md: needs one line <!-- real-speech:start -->"):
        write_readme(readme, "| new |", report)
    assert readme.read_text(encoding="utf-8") == "<!-- results:start -->\n<!-- results:end -->\n"


def test_the_summary_table_comes_from_the_metrics_files(tmp_path):
    metrics = tmp_path / "metrics"
    write(metrics / "eval" / "transformer.json", {"ref": scores(0.5), "asr": scores(0.4)})
    write(metrics / "train" / "transformer.json", {"steps": 300})
    write(metrics / "eval_variants" / "transformer_word_speech" / "transformer.json",
          {"ref": scores(0.55), "asr": scores(0.45)})
    write(metrics / "train_variants" / "transformer_word_speech" / "transformer.json", {"steps": 330})
    params = {"profile": "small", "experiments": ["transformer"],
              "variants": {"transformer_word_speech": {"experiment": "transformer", "features": "word_speech",
                                                       "published": "yi_tao_2019/word_speech"}},
              "active": {"experiments": {"transformer": {"published": "yi_tao_2019/word"}}}}
    text = summary_text(params, metrics)
    rows = [line for line in text.splitlines() if line.startswith("| transformer")]
    assert rows == ["| transformer | transformer | word (GloVe) | 50.0 | 50.0 | 40.0 | 60.0 | 69.4 |",
                    "| transformer_word_speech | transformer | word + speech (sum) | 55.0 | 45.0 | 45.0 | 55.0 | 72.9 |"]
    (metrics / "eval" / "transformer.json").unlink()
    with pytest.raises(FileNotFoundError, match="transformer.json"):
        summary_text(params, metrics)


def test_summary_only_rewrites_the_marked_region_and_nothing_else(tmp_path):
    import yaml

    metrics = tmp_path / "metrics"
    write(metrics / "eval" / "blstm.json", {"ref": scores(0.6), "asr": scores(0.5)})
    write(metrics / "train" / "blstm.json", {"steps": 120})
    params = yaml.safe_load((REPO / "params.yaml").read_text())
    params.update(experiments=["blstm"], variants={}, tunings={})
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(params))
    readme = tmp_path / "README.md"
    readme.write_text("# Title\n\nBefore.\n\n<!-- results:start -->\nold figures\n<!-- results:end -->\n\nAfter.\n")
    assert report_main(["--params", str(tmp_path / "params.yaml"), "--metrics", str(metrics), "--summary-only",
                        "--summary", str(tmp_path / "summary.md"), "--readme", str(readme),
                        "--real-speech", str(tmp_path / "no_real_speech_yet.md"),
                        "--earnings22", str(tmp_path / "no_earnings22_yet.md")]) == 0
    text = readme.read_text()
    assert text.startswith("# Title\n\nBefore.\n\n<!-- results:start -->\nOverall F1") and "old figures" not in text
    assert text.endswith("<!-- results:end -->\n\nAfter.\n")
    assert "| blstm | blstm | word (GloVe) | 60.0 | 40.0 | 50.0 | 50.0 | – |" in text
    assert marked_region(text) == (tmp_path / "summary.md").read_text()
    readme.write_text("no markers\n")
    with pytest.raises(ValueError, match="README.md: needs one line <!-- results:start -->"):
        report_main(["--params", str(tmp_path / "params.yaml"), "--metrics", str(metrics), "--summary-only",
                     "--summary", str(tmp_path / "summary.md"), "--readme", str(readme),
                     "--real-speech", str(tmp_path / "no_real_speech_yet.md"),
                     "--earnings22", str(tmp_path / "no_earnings22_yet.md")])


def test_replace_marked_region_keeps_everything_around_it():
    text = "a\n<!-- results:start -->\nx\ny\n<!-- results:end -->\nb\n"
    assert replace_marked_region(text, "new") == "a\n<!-- results:start -->\nnew\n<!-- results:end -->\nb\n"
    with pytest.raises(ValueError, match="found 1 and 0"):
        replace_marked_region("<!-- results:start -->\n", "new")


def default_stages() -> set[str]:
    """The stages `dvc repro` runs with the committed params (foreach stages expanded)."""
    import yaml

    stages = yaml.safe_load((REPO / "dvc.yaml").read_text(encoding="utf-8"))["stages"]
    params = yaml.safe_load((REPO / "params.yaml").read_text(encoding="utf-8"))
    lists = {"${experiments}": params["experiments"], "${variants}": list(params.get("variants") or {}),
             "${tunings}": list(params.get("tunings") or {}),
             "${embed.feature_sets}": list(params["embed"]["feature_sets"]), "${draws}": list(params.get("draws") or {})}
    names = set()
    for name, entry in stages.items():
        if "foreach" in entry:
            names |= {f"{name}@{item}" for item in lists[entry["foreach"]]}
        else:
            names.add(name)
    return names


def test_the_stage_times_are_those_of_a_complete_run_of_the_default_pipeline():
    """The stage-time table (python -m pipeline.stage_times --page docs/benchmarks.md) lists every stage of the
    default pipeline, once: a run that was stopped, or one of another pipeline, cannot be shown as the default's."""
    from reporting.stage_times import README_END, README_START

    region = marked_region((REPO / "docs" / "benchmarks.md").read_text(encoding="utf-8"), start=README_START,
                           end=README_END)
    if not region.strip():
        pytest.skip("no stage times in the README yet")
    shown = []
    for line in region.splitlines():
        if line.startswith("| ") and not line.startswith(("| stage", "|---")):
            cells = [cell.strip() for cell in line.strip("|").split("|")]
            shown += [cells[0].split(" (")[0], cells[2].split(" (")[0]]
    shown = [name for name in shown if name]
    assert len(shown) == len(set(shown)) and set(shown) == default_stages()


def test_the_readme_run_time_is_the_stage_tables_total():
    """The README's one stated time is the total of the stage-time table it links to (written together)."""
    import re

    from reporting.stage_times import README_END, README_START, RUN_TIME_END, RUN_TIME_START

    line = marked_region((REPO / "README.md").read_text(encoding="utf-8"), start=RUN_TIME_START, end=RUN_TIME_END)
    table = marked_region((REPO / "docs" / "benchmarks.md").read_text(encoding="utf-8"), start=README_START,
                          end=README_END)
    if not line.strip() or not table.strip():
        pytest.skip("no stage times written yet")
    stated = re.search(r"\*\*([0-9.]+) min\*\*", line).group(1)
    total = re.search(r"\*\*([0-9.]+) min\*\* in all", table).group(1)
    assert stated == total
