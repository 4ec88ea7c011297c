"""pipeline.stage, the part every DVC stage wrapper shares, and the command lines the wrappers build with it."""

from __future__ import annotations

import argparse
import importlib
import json

import pytest
import yaml

from pipeline import stage

#: Each stage's options as they were before the wrappers shared pipeline.stage: FLAG=DEFAULT (! required),
#: a bare FLAG for a switch, FLAG+ for a repeatable one, FLAG=* for a list, [NAME] for an optional positional.
COMMAND_LINES = {
    "align": "--audio=data/audio --metrics=metrics/alignment.json --out=data/alignments --params=params.yaml "
             "--prepared=data/prepared --quiet",
    "draw": "--draw=None! --metrics=None --out=None --params=params.yaml",
    "embed": "--export-glove=None --feature-set=None --force --metrics=metrics/embedding_coverage.json "
             "--out=data/features --params=params.yaml --prepared=data/prepared",
    # --device (over evaluate.device, in stage mode) was added
    "evaluate": "--artifacts=artifacts --device=None --experiment=None --features=data/features "
                "--metrics=metrics/eval --params=params.yaml --prepared=data/prepared --stage [prediction] [reference]",
    "features": "--alignments=data/alignments --audio=data/audio --metrics=metrics/acoustic.json --out=data/acoustic "
                "--params=params.yaml --prepared=data/prepared --quiet --report=reports/audio_report.md",
    "prepare": "--metrics=metrics/data.json --out=data/prepared --params=params.yaml --report=reports/data_report.md",
    # --real-speech (the evaluate_real report whose table --readme copies into the README) was added, then
    # --earnings22 (evaluate_earnings22's report, the same for the README's Earnings-22 table)
    "report": "--artifacts+ --earnings22=reports/earnings22_test.md --eval-metrics+ --experiments=* "
              "--features=data/features --figures=reports/figures "
              "--metrics=metrics --no-analysis --out=reports/results.md --params=params.yaml --readme=None "
              "--real-speech=reports/real_speech.md --summary-only --summary=reports/summary.md --title=None "
              "--train-metrics+",
    "report_variants": "--metrics=metrics --out=reports/variants.md --params=params.yaml",
    # --paper-coverage (the paper runs' Speech2Vec, a section of the report) was added
    "speech2vec": "--acoustic=data/acoustic --metrics=metrics/speech2vec.json --out=data/speech2vec "
                  "--paper-coverage=None --params=params.yaml --prepared=data/prepared "
                  "--report=reports/speech2vec_report.md --score-only --talks=data/audio/talks.tsv",
    "synthesize": "--metrics=metrics/audio.json --out=data/audio --params=params.yaml --prepared=data/prepared --quiet",
    # the default run's options are unchanged; --device/--profile/--set, the time budget and --variant (instead of
    # --experiment: one of the two is required) were added
    # --tuning and its --source-artifacts (a trained experiment tuned on another feature set) were added later
    "train": "--artifacts=artifacts --checkpoints=checkpoints --device=None --experiment=None "
             "--features=data/features --metrics=metrics/train --params=params.yaml --pause-after-s=None "
             "--profile=None --set+ --source-artifacts=artifacts --stop-after-s=None --tuning=None --variant=None",
}


def command_line(parser: argparse.ArgumentParser) -> str:
    """``parser``'s options in the notation of COMMAND_LINES."""
    parts = []
    for action in parser._actions:
        flag = "/".join(action.option_strings) or action.dest
        if isinstance(action, argparse._HelpAction):
            continue
        if isinstance(action, argparse._StoreTrueAction):
            parts.append(flag)
        elif isinstance(action, argparse._AppendAction):
            parts.append(f"{flag}+")
        elif action.nargs == "+":
            parts.append(f"{flag}=*")
        elif not action.option_strings:
            parts.append(f"[{flag}]")
        else:
            parts.append(f"{flag}={action.default}" + ("!" if action.required else ""))
    return " ".join(sorted(parts))


@pytest.mark.parametrize("name", sorted(COMMAND_LINES))
def test_every_stage_keeps_its_command_line(name, monkeypatch):
    class Parsed(Exception):
        pass

    def parse_args(parser, args=None, namespace=None):
        raise Parsed(parser)

    module = importlib.import_module(f"pipeline.{name}")
    monkeypatch.setattr(argparse.ArgumentParser, "parse_args", parse_args)
    with pytest.raises(Parsed) as parsed:
        module.main([])
    parser = parsed.value.args[0]
    assert command_line(parser) == COMMAND_LINES[name]
    assert parser.prog == f"python -m pipeline.{name}"


def test_the_parser_says_each_default(capsys):
    parser = stage.stage_parser("pipeline.example", "Example stage.\n\nMore.", out="data/x", metrics="m.json",
                                prepared=True, quiet=True)
    stage.option(parser, "--report", "reports/x.md", "Markdown report")
    with pytest.raises(SystemExit):
        parser.parse_args(["--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert text.startswith("usage: python -m pipeline.example")
    for words in ("params file (default: params.yaml)", "prepared splits (default: data/prepared)",
                  "output (default: data/x)", "metrics (default: m.json)", "Markdown report (default: reports/x.md)",
                  "--quiet no progress bars", "Example stage. More."):
        assert words in text


def test_start_parses_sets_up_logging_and_loads_the_resolved_params(tmp_path, monkeypatch):
    params = {"profile": "b", "data": {"seed": 1, "train_tokens": 10},
              "profiles": {"a": {}, "b": {"data": {"train_tokens": 20}}}}
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(params), encoding="utf-8")
    logged = []
    monkeypatch.setattr(stage.logging, "basicConfig", lambda **kwargs: logged.append(kwargs))
    parser = stage.stage_parser("pipeline.example", "Example.")
    args, loaded = stage.start(parser, ["--params", str(tmp_path / "params.yaml")])
    assert args.params == str(tmp_path / "params.yaml") and loaded["data"] == {"seed": 1, "train_tokens": 20}
    assert loaded["profile"] == "b" and not logged
    stage.start(parser, ["--params", str(tmp_path / "params.yaml")], log=True)
    assert logged == [{"level": stage.logging.INFO, "format": stage.LOG_FORMAT}]


def test_write_json_writes_whole_indented_files_and_can_echo(tmp_path, capsys):
    data = {"split": "ref", "talk": "Zoë", "f1": 0.5}
    target = tmp_path / "metrics" / "deep" / "x.json"
    assert stage.write_json(target, data) == target
    assert target.read_text(encoding="utf-8") == json.dumps(data, indent=2) + "\n"  # "Zo\u00eb", as json.dumps
    assert capsys.readouterr().out == ""
    stage.write_json(target, data, ensure_ascii=False, echo=True)
    assert target.read_text(encoding="utf-8") == json.dumps(data, indent=2, ensure_ascii=False) + "\n"
    assert capsys.readouterr().out == json.dumps(data, indent=2, ensure_ascii=False) + "\n"
    assert sorted(p.name for p in target.parent.iterdir()) == ["x.json"]  # no temporary file left behind
    assert stage.read_json(target) == data


def test_read_json_of_a_missing_file(tmp_path):
    assert stage.read_json(tmp_path / "none.json", missing_ok=True) is None
    with pytest.raises(FileNotFoundError):
        stage.read_json(tmp_path / "none.json")


def test_run_facts_leave_the_metrics_for_the_stage_record(tmp_path, monkeypatch):
    """What DVC hashes is the same at every rerun: wall times, rates, peak memory and what this run made go to
    logs/timings/STAGE.json instead, so that the figures reproduce to the byte."""
    monkeypatch.setattr(stage.StageRecord, "facts", {})
    monkeypatch.setattr(stage.StageRecord, "started", None)
    monkeypatch.setenv("DVC_STAGE", "train@blstm")
    at_exit = []  # not pytest's exit: the record would be written into the repository's logs/
    monkeypatch.setattr(stage.atexit, "register", at_exit.append)
    stage.StageRecord.begin("pipeline.train")
    assert at_exit == [stage.StageRecord.write]  # under DVC the record is written when the stage's process ends
    report = {"steps": 10, "train_seconds": 3.5, "train_tokens_per_second": 9.0, "peak_memory_bytes": 1,
              "peak_memory_kind": "rss", "splits": {"ref": {"hours": 0.5, "compute_seconds_per_audio_minute": 1.2,
                                                            "talks_aligned_this_run": 3}},
              "config": {"max_single_pass_s": 60.0, "window_s": 30.0}}
    metrics = tmp_path / "metrics" / "m.json"
    stage.write_metrics(metrics, report)
    assert json.loads(metrics.read_text()) == {"steps": 10, "splits": {"ref": {"hours": 0.5}},
                                               "config": {"max_single_pass_s": 60.0, "window_s": 30.0}}
    record_path = stage.StageRecord.write(tmp_path / "logs")
    assert record_path.name == "train@blstm.json"
    record = json.loads(record_path.read_text())
    assert record["stage"] == "train@blstm" and record["seconds"] >= 0 and record["finished"]
    assert record[metrics.as_posix()] == {
        "train_seconds": 3.5, "train_tokens_per_second": 9.0, "peak_memory_bytes": 1, "peak_memory_kind": "rss",
        "splits": {"ref": {"compute_seconds_per_audio_minute": 1.2, "talks_aligned_this_run": 3}}}
    assert stage.StageRecord.facts_of(metrics)["train_seconds"] == 3.5
