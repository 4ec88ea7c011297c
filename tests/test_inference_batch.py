"""``punctuate`` over a corpus (``inference.batch``): the bytes the single-file command writes, whatever the engine and
the worker count; bad transcripts named once each while the others are finished; killed half-way, a rerun finishes
only the rest; confidence that is the model's own; a model directory missing a file named, not a traceback."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from corpus.labels import LABELS
from inference import cli
from inference.batch import STATE_DIR
from tests.fixture_dask import local_cluster
from tests.fixture_punctuate import train_models, write_corpus

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    return train_models(tmp_path_factory.mktemp("batch_models"))


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    return write_corpus(tmp_path_factory.mktemp("batch_corpus"))


def outputs(folder: Path) -> dict[str, bytes]:
    """Every file of an output folder (the completion records included), by relative path."""
    return {path.relative_to(folder).as_posix(): path.read_bytes() for path in sorted(folder.rglob("*"))
            if path.is_file()}


def punctuated(folder: Path) -> dict[str, bytes]:
    """The outputs alone (no records)."""
    return {name: data for name, data in outputs(folder).items() if not name.startswith(STATE_DIR + "/")}


def batch(models, corpus, out: Path, *extra: str, inputs: list | None = None) -> int:
    return cli.main([*(str(p) for p in (inputs or [corpus["texts"]])), "-o", str(out), "--model",
                     str(models["timing"]), "--timings-dir", str(corpus["times"]), "--quiet", *extra])


@pytest.fixture(scope="module")
def clean_run(models, corpus, tmp_path_factory):
    out = tmp_path_factory.mktemp("clean") / "out"
    assert batch(models, corpus, out, "--task-words", "150") == 0
    return out


# ----------------------------------------------------------------------------- the same bytes


def test_every_transcript_gets_its_output_and_record(clean_run, corpus):
    names = sorted(corpus["alignment"])
    assert sorted(punctuated(clean_run)) == names
    records = {name: json.loads((clean_run / STATE_DIR / f"{name}.json").read_text()) for name in names}
    assert all(record["transcript"] == name and record["words"] > 0 for name, record in records.items())


@pytest.mark.parametrize("output_format", ["text", "iwslt", "json"])
def test_batch_writes_the_bytes_of_single_file_punctuate(models, corpus, tmp_path, output_format):
    out = tmp_path / "out"
    assert batch(models, corpus, out, "--format", output_format, "--task-words", "100") == 0
    suffix = {"text": ".txt", "iwslt": ".tsv", "json": ".json"}[output_format]
    for name, timings in corpus["alignment"].items():
        single = tmp_path / "single"
        assert cli.main([str(corpus["texts"] / name), "--model", str(models["timing"]), "--alignment", str(timings),
                         "--format", output_format, "-o", str(single)]) == 0
        assert (out / name).with_suffix(suffix).read_bytes() == single.read_bytes(), name


def test_the_timings_are_read(models, corpus, clean_run, tmp_path):
    """Without the timings the same model writes other marks: the batch gave it the times (and the right ones)."""
    out = tmp_path / "out"
    assert cli.main([str(corpus["texts"]), "-o", str(out), "--model", str(models["timing"]), "--quiet",
                     "--workers", "1"]) == 0
    assert punctuated(out).keys() == punctuated(clean_run).keys() and punctuated(out) != punctuated(clean_run)


def test_each_timings_file_is_read_once_per_transcript(models, corpus, tmp_path, monkeypatch):
    """The plan reads a transcript's timings for its resume fingerprint; the worker parses those bytes."""
    reads: dict[str, int] = {}
    real_read_bytes, real_open = Path.read_bytes, open
    times = Path(corpus["times"]).resolve()

    def counted(path: Path) -> bytes:
        if times in Path(path).resolve().parents:
            reads[Path(path).name] = reads.get(Path(path).name, 0) + 1
        return real_read_bytes(path)

    def counted_open(file, *args, **kwargs):  # noqa: ANN001, ANN002, ANN003
        if isinstance(file, (str, os.PathLike)) and times in Path(file).resolve().parents:
            reads[Path(file).name] = reads.get(Path(file).name, 0) + 1
        return real_open(file, *args, **kwargs)

    monkeypatch.setattr(Path, "read_bytes", counted)
    monkeypatch.setattr("builtins.open", counted_open)
    assert batch(models, corpus, tmp_path / "out", "--workers", "1") == 0
    transcripts_of: dict[str, int] = {}
    for timings in corpus["alignment"].values():
        transcripts_of[Path(timings).name] = transcripts_of.get(Path(timings).name, 0) + 1
    assert transcripts_of["all.ctm"] == 2  # one Kaldi-style file for two transcripts: read once for each
    assert reads == transcripts_of


@pytest.mark.slow
def test_the_same_bytes_whatever_the_engine_and_the_worker_count(models, corpus, clean_run, tmp_path):
    expected = outputs(clean_run)
    assert batch(models, corpus, tmp_path / "two", "--workers", "2", "--task-words", "40") == 0
    assert outputs(tmp_path / "two") == expected
    assert batch(models, corpus, tmp_path / "one_task", "--task-words", "100000") == 0  # every text in one batch
    assert outputs(tmp_path / "one_task") == expected
    with local_cluster() as address:
        assert batch(models, corpus, tmp_path / "dask", "--dask", address, "--task-words", "150") == 0
    assert outputs(tmp_path / "dask") == expected


# ----------------------------------------------------------------------------- bad transcripts


def test_bad_transcripts_are_named_once_and_the_others_finished(models, corpus, clean_run, tmp_path, monkeypatch,
                                                                 capsys):
    texts, times = tmp_path / "texts", tmp_path / "times"
    shutil.copytree(corpus["texts"], texts)
    shutil.copytree(corpus["times"], times)
    (texts / "locked.txt").write_text("so it goes\n", encoding="utf-8")
    (times / "locked.tsv").write_text("so\t0.1\t0.2\nit\t0.3\t0.4\ngoes\t0.5\t0.6\n", encoding="utf-8")
    (texts / "latin1.txt").write_bytes("so it goes\ncaf\u00e9 au lait\n".encode("latin-1"))
    (times / "latin1.tsv").write_text("so\t0.1\t0.2\n", encoding="utf-8")
    (texts / "mismatch.txt").write_text("so it goes\n", encoding="utf-8")
    (times / "mismatch.tsv").write_text("so\t0.1\t0.2\nit\t0.3\t0.4\nwent\t0.5\t0.6\n", encoding="utf-8")
    real_read_bytes = Path.read_bytes

    def read_bytes(self):  # a file this process may not read (tests run as root, whom chmod does not stop)
        if self.name == "locked.txt":
            raise PermissionError(13, "Permission denied", str(self))
        return real_read_bytes(self)

    monkeypatch.setattr(Path, "read_bytes", read_bytes)
    out = tmp_path / "out"
    assert cli.main([str(texts), "-o", str(out), "--model", str(models["timing"]), "--timings-dir", str(times),
                     "--quiet", "--report", str(tmp_path / "report.json")]) == 1
    error = capsys.readouterr().err
    failures = [line for line in error.splitlines() if line.startswith("punctuate: failed: ")]
    assert len(failures) == 3, error
    assert f"{texts / 'latin1.txt'}:2: not UTF-8 text" in failures[0]
    assert f"{texts / 'locked.txt'}: cannot read (Permission denied)" in failures[1]
    assert f"{times / 'mismatch.tsv'}:3: the word 'went' does not match" in failures[2]
    assert "3 failed" in error
    assert punctuated(out) == punctuated(clean_run)  # every other output, the bytes of a clean run
    report = json.loads((tmp_path / "report.json").read_text())
    assert report["counts"] == {"punctuated": len(corpus["alignment"]), "skipped": 0, "failed": 3}


def test_usage_errors(models, corpus, tmp_path, capsys):
    common = ["--model", str(models["timing"]), "--quiet"]
    for argv, message in (([str(corpus["texts"]), *common], "needs -o OUT_DIR"),
                          ([str(corpus["texts"]), "-", "-o", str(tmp_path / "o"), *common], "not standard input"),
                          ([str(corpus["texts"]), "-o", str(tmp_path / "o"), "--alignment", "x.tsv", *common],
                           "a corpus takes --timings-dir")):
        with pytest.raises(SystemExit):
            cli.main(argv)
        assert message in capsys.readouterr().err
    assert cli.main([str(corpus["texts"] / "sub"), "-o", str(corpus["texts"]), *common]) == 2
    assert "holds the input folder" in capsys.readouterr().err
    assert cli.main([str(corpus["texts"]), "-o", str(tmp_path / "o"), "--timings-dir", str(tmp_path / "nope"),
                     *common]) == 2
    assert "timings folder not found" in capsys.readouterr().err


def test_missing_timings_and_missing_inputs_are_named(models, corpus, tmp_path, capsys):
    texts = tmp_path / "texts"
    texts.mkdir()
    (texts / "untimed.txt").write_text("so it goes\n", encoding="utf-8")
    assert cli.main([str(texts), str(tmp_path / "nowhere.txt"), "-o", str(tmp_path / "o"), "--model",
                     str(models["timing"]), "--timings-dir", str(corpus["times"]), "--quiet"]) == 1
    error = capsys.readouterr().err
    assert f"{tmp_path / 'nowhere.txt'}: no such file or folder" in error
    assert f"no word timings for untimed.txt in {corpus['times']}: no untimed.tsv, untimed.ctm, untimed.json or " \
           "utterance 'untimed' of its other CTM files" in error


# ----------------------------------------------------------------------------- resuming

KILLER = """
import os, signal, sys
import inference.batch as batch
from inference import cli

calls = 0
write = batch.atomic_write_text


def dying_write(path, content):
    global calls
    calls += 1
    if calls == int(os.environ["KILL_AT_WRITE"]):
        os.kill(os.getpid(), signal.SIGKILL)  # no clean-up of any kind, as a power cut
    return write(path, content)


batch.atomic_write_text = dying_write
sys.exit(cli.main(sys.argv[1:]))
"""


def test_killed_half_way_a_rerun_finishes_only_the_rest(models, corpus, clean_run, tmp_path):
    out = tmp_path / "out"
    argv = [str(corpus["texts"]), "-o", str(out), "--model", str(models["timing"]), "--timings-dir",
            str(corpus["times"]), "--quiet", "--task-words", "60", "--report", str(tmp_path / "report.json")]
    # each transcript writes its output, then its record: the 8th write is the 4th transcript's record, so the
    # 4th transcript's output is on disk without its record
    killed = subprocess.run([sys.executable, "-c", KILLER, *argv], cwd=REPO, capture_output=True, text=True,
                            env={**os.environ, "KILL_AT_WRITE": "8"}, timeout=300)
    assert killed.returncode == -9, killed.stderr
    assert len(list((out / STATE_DIR).rglob("*.json"))) == 3 and len(punctuated(out)) == 4
    assert cli.main(argv) == 0
    report = json.loads((tmp_path / "report.json").read_text())
    assert report["counts"] == {"punctuated": len(corpus["alignment"]) - 3, "skipped": 3, "failed": 0}
    assert outputs(out) == outputs(clean_run)  # byte for byte, records included


def test_a_rerun_redoes_what_changed(models, corpus, clean_run, tmp_path):
    out = tmp_path / "out"
    shutil.copytree(clean_run, out)
    texts = tmp_path / "texts"
    shutil.copytree(corpus["texts"], texts)
    (texts / "talk1.txt").write_text((texts / "talk1.txt").read_text() + "and more\n", encoding="utf-8")
    (out / "talk2.txt").write_text("edited by hand\n", encoding="utf-8")
    report = tmp_path / "report.json"
    assert cli.main([str(texts), "-o", str(out), "--model", str(models["timing"]), "--timings-dir",
                     str(corpus["times"]), "--quiet", "--report", str(report)]) == 1  # talk1's times end early
    per = {entry["name"]: entry["status"] for entry in json.loads(report.read_text())["per_transcript"]}
    assert per.pop("talk1.txt") == "failed" and per.pop("talk2.txt") == "punctuated"
    assert set(per.values()) == {"skipped"}
    assert (out / "talk2.txt").read_bytes() == (clean_run / "talk2.txt").read_bytes()
    # another format is another output; another model makes every output again
    assert cli.main([str(texts / "talk2.txt"), str(texts / "talk3.txt"), "-o", str(out), "--model",
                     str(models["transformer"]), "--quiet", "--report", str(report)]) == 0
    assert json.loads(report.read_text())["counts"]["punctuated"] == 2


# ----------------------------------------------------------------------------- confidence


@pytest.mark.parametrize("model", ["timing", "transformer"])
def test_the_probabilities_are_those_the_marks_were_taken_from(models, corpus, tmp_path, model):
    out = tmp_path / "out"
    common = [str(corpus["texts"]), "--model", str(models[model]), "--quiet", "--workers", "1"]
    assert cli.main([*common, "-o", str(out), "--format", "json"]) == 0
    assert cli.main([*common, "-o", str(tmp_path / "iwslt"), "--format", "iwslt"]) == 0
    assert cli.main([*common, "-o", str(tmp_path / "text")]) == 0
    checked = 0
    for path in sorted(out.glob("*.json")):
        data = json.loads(path.read_text(encoding="utf-8"))
        assert data["labels"] == list(LABELS)
        assert data["text"] == (tmp_path / "text" / path.with_suffix(".txt").name).read_text(encoding="utf-8")
        iwslt = [line.split("\t") for line in (tmp_path / "iwslt" / path.with_suffix(".tsv").name).read_text(
            encoding="utf-8").splitlines()]
        assert [[word["word"], word["label"]] for word in data["words"]] == iwslt  # the same labels
        for word in data["words"]:
            probabilities = [word["probabilities"][label] for label in LABELS]
            assert LABELS[int(np.argmax(probabilities))] == word["label"]
            assert sum(probabilities) == pytest.approx(1.0, abs=1e-5)
            checked += 1
    assert checked > 100


def test_words_the_model_does_not_read_have_no_probabilities(models, tmp_path):
    source = tmp_path / "in.txt"
    source.write_text("so \U0001F600 it goes (Laughter)\n", encoding="utf-8")
    assert cli.main([str(source), "--model", str(models["timing"]), "--format", "json", "-o",
                     str(tmp_path / "out.json")]) == 0
    words = json.loads((tmp_path / "out.json").read_text(encoding="utf-8"))["words"]
    assert [(w["word"], w["probabilities"] is None) for w in words] == [
        ("so", False), ("\U0001F600", True), ("it", False), ("goes", False), ("(Laughter)", True)]
    assert words[1]["label"] == "O"


# ----------------------------------------------------------------------------- the model directory


def test_a_model_directory_missing_a_file_is_named_not_a_traceback(models, corpus, tmp_path, capsys):
    model = tmp_path / "model"
    shutil.copytree(models["timing"], model)
    (model / "embedder" / "embedder.json").unlink()
    argv = [str(corpus["texts"]), "-o", str(tmp_path / "out"), "--model", str(model), "--quiet"]
    assert cli.main(argv) == 2
    assert cli.main([*argv, "--workers", "2"]) == 2
    errors = capsys.readouterr().err.splitlines()
    assert errors == [f"punctuate: error: {model / 'embedder' / 'embedder.json'}: missing; the model directory has "
                      "no token embedder"] * 2
    assert not list((tmp_path / "out").rglob("*.txt"))
    assert cli.main(argv[:3] + ["--model", str(tmp_path / "nothing"), "--quiet"]) == 2
    assert "not a trained model directory (no config.json)" in capsys.readouterr().err


def test_shared_batches_give_the_same_marks(models, corpus, clean_run, tmp_path):
    """Windows of several transcripts in one batch: the model's arithmetic may move in its last bits (an LSTM's),
    the marks stay (here, and wherever two labels are not tied to the last bit)."""
    assert batch(models, corpus, tmp_path / "shared", "--share-batches", "--task-words", "100000") == 0
    assert punctuated(tmp_path / "shared") == punctuated(clean_run)


def test_transcripts_whose_outputs_would_be_one_file_are_refused(models, tmp_path, capsys):
    for name in ("talk.txt", "talk.text"):
        (tmp_path / name).write_text("so it goes\n", encoding="utf-8")
    argv = [str(tmp_path / "talk.txt"), str(tmp_path / "talk.text"), "-o", str(tmp_path / "out"), "--model",
            str(models["timing"]), "--quiet"]
    assert cli.main(argv) == 0  # text: each keeps its name
    assert cli.main([*argv, "--format", "iwslt"]) == 1  # both would be talk.tsv
    assert capsys.readouterr().err.count("its output would be the one of talk.text, talk.txt") == 2
    assert not (tmp_path / "out" / "talk.tsv").exists()


def test_a_model_over_a_pretrained_encoder_writes_the_bytes_of_single_file_punctuate(models, corpus, tmp_path):
    """punctuate's default kind of model: subwords of its own tokenizer, its encoder's trace, a BiLSTM head."""
    pytest.importorskip("transformers")
    from tests.fixture_punctuate import encoder_model

    model = encoder_model(tmp_path, models["transformer"])
    out = tmp_path / "out"
    assert cli.main([str(corpus["texts"]), "-o", str(out), "--model", str(model), "--format", "json", "--quiet",
                     "--task-words", "200"]) == 0
    for name in sorted(corpus["alignment"])[:4]:
        single = tmp_path / "single.json"
        assert cli.main([str(corpus["texts"] / name), "--model", str(model), "--format", "json", "-o",
                         str(single)]) == 0
        assert (out / name).with_suffix(".json").read_bytes() == single.read_bytes(), name
