"""``python -m aligner batch`` / aligner.batch.align_batch on tiny flite talks (WAV, FLAC and SPH): the single-file
format, the same bytes with 1 or 2 local workers and on a Dask LocalCluster, resuming, a bad talk named and failing
the run after the others finish; and the --min-placed rule of both commands (a stand-in backend places exactly the
share of words a test needs)."""

from __future__ import annotations

import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest

soundfile = pytest.importorskip("soundfile", reason="soundfile is not installed")
pytest.importorskip("pocketsphinx", reason="pocketsphinx is not installed")

from aligner import WordTiming  # noqa: E402
from aligner import registry  # noqa: E402
from aligner.batch import RECORD_SUFFIX, align_batch, find_talks  # noqa: E402
from aligner.cli import main  # noqa: E402
from audio.reference_speech import flite_available, synthesize  # noqa: E402
from corpus.text import tokenize_for_inference  # noqa: E402
from tests.fixture_dask import local_cluster  # noqa: E402

needs_flite = pytest.mark.skipif(not flite_available(), reason="flite is not installed (apt-get install flite)")
REPO = Path(__file__).resolve().parents[1]
TALKS = {  # name -> (audio format, text)
    "alpha": ("wav", "So, I don't think the cat is here. It's gone!"),
    "bravo": ("flac", "The river was cold that morning. My grandmother said we shouldn't go in."),
    "charlie": ("sph", "She laughed at me for an hour, and then we walked back home together."),
    "delta": ("wav", "Two million people die every year. Most of them are children."),
}


@pytest.fixture(scope="module")
def talks(tmp_path_factory) -> Path:
    """``audio/`` (one WAV, FLAC or SPH per talk) and ``text/`` (NAME.txt) under the returned folder."""
    if not flite_available():
        pytest.skip("flite is not installed")
    root = tmp_path_factory.mktemp("batch")
    (root / "audio").mkdir()
    (root / "text").mkdir()
    for name, (kind, text) in TALKS.items():
        synthesize(text, root / f"{name}.wav")
        samples, rate = soundfile.read(str(root / f"{name}.wav"), dtype="int16")
        if kind == "wav":
            shutil.copy(root / f"{name}.wav", root / "audio" / f"{name}.wav")
        else:
            soundfile.write(str(root / "audio" / f"{name}.{kind}"), samples, rate, format={"flac": "FLAC", "sph": "NIST"}[kind],
                            subtype="PCM_16")
        (root / "text" / f"{name}.txt").write_text(text + "\n", encoding="utf-8")
    return root


def outputs(folder: Path) -> dict[str, bytes]:
    return {path.name: path.read_bytes() for path in sorted(folder.iterdir())}


@pytest.fixture(scope="module")
def first_run(talks, tmp_path_factory):
    out = tmp_path_factory.mktemp("first") / "out"
    report = align_batch(talks / "audio", talks / "text", out, workers=1)
    return out, report


@needs_flite
def test_every_talk_gets_the_single_file_commands_output(talks, first_run, tmp_path):
    out, report = first_run
    assert report.exit_status() == 0 and [t.name for t in report.talks] == sorted(TALKS)
    assert {t.status for t in report.talks} == {"aligned"}
    assert sorted(outputs(out)) == sorted([f"{n}.tsv" for n in TALKS] + [f"{n}{RECORD_SUFFIX}" for n in TALKS])
    for name, (kind, text) in TALKS.items():
        single = tmp_path / f"{name}.tsv"
        assert main([str(talks / "audio" / f"{name}.{kind}"), str(talks / "text" / f"{name}.txt"),
                     "-o", str(single)]) == 0
        assert (out / f"{name}.tsv").read_bytes() == single.read_bytes(), name
        rows = [line.split("\t") for line in single.read_text().splitlines()[1:]]
        assert [row[0] for row in rows] == tokenize_for_inference(text)
        assert sum(bool(row[1]) for row in rows) >= len(rows) - 1  # the talks are clean speech
    talk = next(t for t in report.talks if t.name == "charlie")  # the SPH one
    assert talk.words == len(tokenize_for_inference(TALKS["charlie"][1])) and talk.audio_seconds > 2


@needs_flite
def test_the_same_bytes_with_one_or_two_workers_and_on_a_dask_cluster(talks, first_run, tmp_path):
    out, _ = first_run
    two = align_batch(talks / "audio", talks / "text", tmp_path / "two", workers=2)
    assert two.engine == "2 local processes" and two.exit_status() == 0
    with local_cluster() as scheduler:
        dask = align_batch(talks / "audio", talks / "text", tmp_path / "dask", scheduler=scheduler)
    assert dask.engine.startswith("dask scheduler tcp://") and dask.exit_status() == 0
    reference = outputs(out)
    assert outputs(tmp_path / "two") == reference
    assert outputs(tmp_path / "dask") == reference
    assert [t.placed for t in two.talks] == [t.placed for t in dask.talks] == [t.placed for t in first_run[1].talks]


@needs_flite
def test_a_stopped_run_resumes_redoing_only_what_is_not_complete(talks, first_run, tmp_path):
    out = tmp_path / "out"
    shutil.copytree(first_run[0], out)
    before = {path.name: path.stat().st_mtime_ns for path in out.iterdir()}
    (out / "alpha.tsv").unlink()  # stopped before its TSV was written
    (out / f"bravo{RECORD_SUFFIX}").unlink()  # stopped between the TSV and its record
    tsv = out / "charlie.tsv"
    tsv.write_bytes(tsv.read_bytes()[:-20])  # a TSV that is not what its record says
    report = align_batch(talks / "audio", talks / "text", out, workers=2)
    assert {t.name: t.status for t in report.talks} == {"alpha": "aligned", "bravo": "aligned", "charlie": "aligned",
                                                        "delta": "skipped"}
    assert report.to_dict()["counts"] == {"aligned": 3, "skipped": 1, "failed": 0}
    assert outputs(out) == outputs(first_run[0])  # the same bytes as the uninterrupted run
    for name in ("delta.tsv", f"delta{RECORD_SUFFIX}"):
        assert (out / name).stat().st_mtime_ns == before[name]  # skipped: not even rewritten
    again = align_batch(talks / "audio", talks / "text", out, workers=1)
    assert {t.status for t in again.talks} == {"skipped"}
    # a changed transcript, or other settings, redo the talk
    text = tmp_path / "text"
    shutil.copytree(talks / "text", text)
    (text / "delta.txt").write_text("Two million people die every year.\n", encoding="utf-8")
    changed = align_batch(talks / "audio", text, out, workers=1)
    assert {t.name for t in changed.talks if t.status == "aligned"} == {"delta"}
    estimates = align_batch(talks / "audio", text, out, workers=1, estimates=True)
    assert {t.status for t in estimates.talks} == {"aligned"}


@needs_flite
def test_a_bad_talk_is_named_and_fails_the_run_after_the_others_finish(talks, tmp_path, capsys):
    audio = tmp_path / "audio"
    shutil.copytree(talks / "audio", audio)
    text = tmp_path / "text"
    shutil.copytree(talks / "text", text)
    (audio / "broken.wav").write_bytes(b"RIFF\x10\x00\x00\x00WAVEfmt garbage" + bytes(range(256)))
    (text / "broken.txt").write_text("These words have no audio to go with.\n", encoding="utf-8")
    soundfile.write(str(audio / "untold.wav"), 0.1 * np.sin(np.arange(16000) / 3.0), 16000)  # no transcript
    (text / "orphan.txt").write_text("A transcript without audio.\n", encoding="utf-8")
    (text / "empty.txt").write_text(" ... \n", encoding="utf-8")
    shutil.copy(audio / "alpha.wav", audio / "empty.wav")
    out = tmp_path / "out"
    status = main(["batch", str(audio), str(text), "-o", str(out), "--workers", "2", "--quiet",
                   "--report", str(tmp_path / "report.json")])
    err = capsys.readouterr().err
    assert status == 1
    assert "FAILED broken: talk broken: AudioError: cannot read audio file" in err
    assert "FAILED untold: talk untold: no transcript" in err
    assert "FAILED empty: talk empty: InputError: transcript" in err and "has no words" in err
    assert "transcript orphan.txt has no audio file" in err and "3 talk(s) failed" in err
    for name in TALKS:  # the others are done
        assert (out / f"{name}.tsv").is_file() and (out / f"{name}{RECORD_SUFFIX}").is_file()
    assert not (out / "broken.tsv").exists() and not (out / f"broken{RECORD_SUFFIX}").exists()
    import json

    report = json.loads((tmp_path / "report.json").read_text())
    assert [t["talk"] for t in report["failed"]] == ["broken", "empty", "untold"]  # sorted by talk
    assert [t["name"] for t in report["per_talk"]] == sorted([*TALKS, "broken", "empty", "untold"])
    # fixed, the run resumes: only the broken talks are aligned
    for name in ("broken", "untold", "empty"):
        (audio / f"{name}.wav").unlink()
    assert main(["batch", str(audio), str(text), "-o", str(out), "--workers", "1", "--quiet"]) == 0
    assert f"0 aligned, {len(TALKS)} already complete, 0 failed" in capsys.readouterr().err


def test_two_recordings_of_one_name_and_missing_folders(tmp_path, capsys):
    (tmp_path / "audio").mkdir()
    (tmp_path / "text").mkdir()
    for name in ("twin.wav", "twin.flac", ".hidden.wav", "notes.md"):
        (tmp_path / "audio" / name).write_bytes(b"x")
    (tmp_path / "text" / "twin.txt").write_text("hello", encoding="utf-8")
    talks, problems, orphans = find_talks(tmp_path / "audio", tmp_path / "text")
    assert talks == {} and orphans == []
    assert problems == {"twin": "talk twin: several audio files: twin.flac, twin.wav"}
    assert main(["batch", str(tmp_path / "nope"), str(tmp_path / "text"), "-o", str(tmp_path / "o")]) == 2
    assert "audio folder not found" in capsys.readouterr().err
    assert main(["batch", str(tmp_path / "audio"), str(tmp_path / "text"), "-o", str(tmp_path / "o"),
                 "--backend", "nope"]) == 2
    assert "unknown backend 'nope'" in capsys.readouterr().err


def test_an_unreachable_dask_scheduler_is_bad_input(talks, tmp_path, capsys, monkeypatch):
    pytest.importorskip("distributed")
    from executor import tasks as parallel

    monkeypatch.setattr(parallel, "CONNECT_TIMEOUT_S", 1.0)
    assert main(["batch", str(talks / "audio"), str(talks / "text"), "-o", str(tmp_path / "o"), "--quiet",
                 "--dask", "tcp://127.0.0.1:9"]) == 2
    assert "cannot reach the Dask scheduler at 'tcp://127.0.0.1:9'" in capsys.readouterr().err


@needs_flite
def test_python_dash_m_aligner_batch_with_worker_processes(talks, first_run, tmp_path):
    done = subprocess.run([sys.executable, "-m", "aligner", "batch", str(talks / "audio"), str(talks / "text"),
                           "-o", str(tmp_path / "out"), "--workers", "2", "--quiet"],
                          capture_output=True, text=True, cwd=REPO)
    assert done.returncode == 0, done.stderr
    assert "4 talks (2 local processes): 4 aligned" in done.stderr
    assert outputs(tmp_path / "out") == outputs(first_run[0])


# --- the --min-placed rule ---------------------------------------------------------------------------------


@dataclass
class PlacesAShare:
    """A stand-in backend placing the first ``share`` of the words (rounded down)."""

    share: float
    name: str = "share"

    def is_available(self, config=None) -> bool:  # noqa: ANN001
        return True

    def align(self, audio_path, words, *, config):  # noqa: ANN001
        placed = int(self.share * len(words))
        return [WordTiming(word, 0.1 * i, 0.1 * i + 0.05, True) if i < placed
                else WordTiming(word, float("nan"), float("nan"), False) for i, word in enumerate(words)]


WORDS_22 = " ".join(f"word{i}" for i in range(22))


@pytest.mark.parametrize(("share", "min_placed", "status", "warned"), [
    (0.5, None, 3, True),     # 11 of 22: half unplaced -> warning and exit 3 under the default 0.5
    (0.5, "0", 0, True),      # --min-placed 0 accepts anything (the warning stays)
    (12 / 22, None, 0, False),
    (0.0, "0", 0, True),
    (1.0, "1", 0, False),     # a complete alignment passes any threshold
    (21 / 22, "1", 3, False),
])
def test_the_single_file_command_fails_when_half_or_more_words_are_unplaced(tmp_path, capsys, monkeypatch, share,
                                                                            min_placed, status, warned):
    monkeypatch.setitem(registry._FACTORIES, "share", lambda: PlacesAShare(share))
    (tmp_path / "t.txt").write_text(WORDS_22, encoding="utf-8")
    argv = [str(tmp_path / "a.wav"), str(tmp_path / "t.txt"), "-o", str(tmp_path / "o.tsv"), "--backend", "share"]
    if min_placed is not None:
        argv += ["--min-placed", min_placed]
    assert main(argv) == status
    err = capsys.readouterr().err
    assert ("warning:" in err) == warned
    assert (tmp_path / "o.tsv").is_file()  # written all the same
    if status == 3:
        assert "--min-placed" in err


def test_the_batch_reports_talks_below_min_placed_and_exits_3(tmp_path, capsys, monkeypatch):
    monkeypatch.setitem(registry._FACTORIES, "share", lambda: PlacesAShare(0.5))
    (tmp_path / "audio").mkdir()
    (tmp_path / "text").mkdir()
    soundfile.write(str(tmp_path / "audio" / "half.wav"), 0.1 * np.sin(np.arange(16000) / 3.0), 16000)
    (tmp_path / "text" / "half.txt").write_text(WORDS_22, encoding="utf-8")
    common = ["batch", str(tmp_path / "audio"), str(tmp_path / "text"), "-o", str(tmp_path / "out"), "--backend",
              "share", "--workers", "1", "--quiet"]
    assert main(common) == 3
    err = capsys.readouterr().err
    assert "warning: half: only 11 of 22 words placed" in err and "1 talk(s) with no more than 50%" in err
    assert main([*common, "--min-placed", "0"]) == 0  # skipped as complete, and accepted
    assert len((tmp_path / "out" / "half.tsv").read_text().splitlines()) == 23
