"""Bad audio input is named, not passed over: a WAV cut short of what its header states, a
header stating the wrong sample rate, a transcript that is not the audio's; and a stage with a failed talk
finishes the others, then exits non-zero so that DVC does not record it as done. Tiny flite speech."""

from __future__ import annotations

import json
import shutil
import struct
from pathlib import Path

import pytest
import yaml

pytest.importorskip("pocketsphinx", reason="pocketsphinx is not installed")
pytest.importorskip("soundfile", reason="soundfile is not installed")
pytest.importorskip("librosa", reason="librosa is not installed")

from aligner import AlignConfig, AudioError, PoorAlignmentError, align  # noqa: E402
from aligner.audio import load_audio, wav_truncation  # noqa: E402
from aligner.cli import main as aligner_main  # noqa: E402
from audio.reference_speech import flite_available, synthesize  # noqa: E402
from corpus.talks_table import read_talks_table  # noqa: E402
from tests.test_audio_stage import audio_settings, write_tiny_corpus  # noqa: E402

pytestmark = pytest.mark.skipif(not flite_available(), reason="flite is not installed (apt-get install flite)")

TEXT = "The river was cold that morning. My grandmother said we should all stay at home today, and we did."
OTHER = "It was a sunny afternoon and the children played football in the park near the old church."
THRESHOLD = AlignConfig(min_placed_share=0.5)


@pytest.fixture(scope="module")
def speech(tmp_path_factory):
    root = tmp_path_factory.mktemp("bad_audio")
    reference = synthesize(TEXT, root / "good.wav")
    data = (root / "good.wav").read_bytes()
    (root / "truncated.wav").write_bytes(data[: 44 + (len(data) - 44) // 2])
    wrong_rate = bytearray(data)
    fmt = wrong_rate.find(b"fmt ")
    struct.pack_into("<II", wrong_rate, fmt + 12, 8000, 16000)  # sample rate and byte rate: half the truth
    (root / "wrong_rate.wav").write_bytes(bytes(wrong_rate))
    for name, text in (("words.txt", TEXT), ("other.txt", OTHER)):
        (root / name).write_text(text, encoding="utf-8")
    return root, reference


def test_the_right_audio_places_nearly_every_word(speech):
    root, reference = speech
    timings = align(root / "good.wav", reference.words, config=THRESHOLD)
    assert sum(t.aligned for t in timings) >= len(reference.words) - 1
    assert wav_truncation(root / "good.wav") is None


def test_a_wav_cut_short_of_its_header_is_refused(speech):
    root, reference = speech
    stated, held = wav_truncation(root / "truncated.wav")
    assert stated == pytest.approx(reference.duration, abs=0.01) and held == pytest.approx(stated / 2, abs=0.01)
    with pytest.raises(AudioError, match=r"truncated: its header states .* s of audio, the file holds .*truncated"):
        load_audio(root / "truncated.wav")
    with pytest.raises(AudioError, match="truncated"):
        align(root / "truncated.wav", reference.words)


def test_a_header_with_the_wrong_sample_rate_or_another_transcript_fails_the_threshold(speech):
    root, reference = speech
    with pytest.raises(PoorAlignmentError, match=r"wrong_rate\.wav: only \d+ of \d+ words placed") as wrong_rate:
        align(root / "wrong_rate.wav", reference.words, config=THRESHOLD)
    assert wrong_rate.value.placed < wrong_rate.value.total / 2
    from corpus.text import tokenize_for_inference

    other = tokenize_for_inference(OTHER)
    with pytest.raises(PoorAlignmentError, match="sample rate") as mismatch:
        align(root / "good.wav", other, config=THRESHOLD)
    assert mismatch.value.placed < len(other) / 2
    # without a threshold the timings come back (the caller reports them)
    assert len(align(root / "good.wav", other)) == len(other)


def test_the_command_line_warns_and_exits_3_below_its_threshold(speech, tmp_path, capsys):
    root, _ = speech
    assert aligner_main([str(root / "good.wav"), str(root / "words.txt"), "-o", str(tmp_path / "good.tsv")]) == 0
    assert "warning" not in capsys.readouterr().err
    for wav, transcript in (("wrong_rate.wav", "words.txt"), ("good.wav", "other.txt")):
        out = tmp_path / f"{wav}.{transcript}.tsv"
        assert aligner_main([str(root / wav), str(root / transcript), "-o", str(out)]) == 3
        err = capsys.readouterr().err
        assert f"warning: {root / wav}: only" in err and "--min-placed" in err
        assert out.is_file()  # written all the same
        assert aligner_main([str(root / wav), str(root / transcript), "-o", str(out), "--min-placed", "0"]) == 0
        assert "warning" in capsys.readouterr().err
    assert aligner_main([str(root / "truncated.wav"), str(root / "words.txt"), "-o", str(tmp_path / "t.tsv")]) == 2
    assert "truncated" in capsys.readouterr().err


@pytest.fixture(scope="module")
def ref_audio(tmp_path_factory):
    """The tiny corpus of test_audio_stage with its two Ref talks spoken (and nothing else)."""
    from audio.synthesize_stage import make_talk_audio

    root = tmp_path_factory.mktemp("bad_stage")
    prepared, iwslt = write_tiny_corpus(root)
    make_talk_audio(prepared, iwslt, root / "audio", **audio_settings(split_tokens={"ref": None}))
    return root, prepared, iwslt


def write_params(path: Path, iwslt: Path, **align_config) -> Path:
    params = {"profile": "tiny", "profiles": {"tiny": {}}, "data": {"iwslt_dir": str(iwslt)},
              "audio": {**audio_settings(split_tokens={"ref": None}), "voices": ["flite:kal16"]},
              "align": {"backend": "pocketsphinx", "config": align_config, "workers": 1, "scheduler": None},
              "features": {"splits": ["ref", "asr"], "config": {}, "workers": 1, "scheduler": None}}
    path.write_text(yaml.safe_dump(params), encoding="utf-8")
    return path


def test_the_align_stage_fails_bad_talks_finishes_the_others_and_exits_1(ref_audio, tmp_path, capsys):
    from pipeline import align as align_stage
    from pipeline import features as features_stage

    root, prepared, iwslt = ref_audio
    audio = tmp_path / "audio"
    shutil.copytree(root / "audio", audio)
    rows = {(r["split"], r["talk"]): r for r in read_talks_table(audio / "talks.tsv")}
    wav = audio / rows[("ref", "102")]["wav"]
    data = wav.read_bytes()
    wav.write_bytes(data[: len(data) * 3 // 4])  # cut short
    params = write_params(tmp_path / "params.yaml", iwslt, min_placed_share=0.5)
    args = ["--params", str(params), "--quiet", "--audio", str(audio), "--prepared", str(prepared),
            "--out", str(tmp_path / "alignments"), "--metrics", str(tmp_path / "alignment.json")]
    assert align_stage.main(args) == 1
    err = capsys.readouterr().err
    assert "FAILED ref 102: AudioError: audio file is truncated" in err and "exit status 1" in err
    report = json.loads((tmp_path / "alignment.json").read_text())  # every output written all the same
    assert {(f["split"], f["talk"]) for f in report["failed"]} == {("ref", "102"), ("asr", "102")}
    assert report["splits"]["ref"]["talks_aligned"] == 1 and (tmp_path / "alignments" / "ref" / "101.json").is_file()

    # the wrong sample rate in talk 101's header: placed too few words, below align.config.min_placed_share
    wav.write_bytes(data)
    first = audio / rows[("ref", "101")]["wav"]
    wrong = bytearray(first.read_bytes())
    fmt = wrong.find(b"fmt ")
    struct.pack_into("<II", wrong, fmt + 12, 8000, 16000)
    first.write_bytes(bytes(wrong))
    assert align_stage.main(args) == 1
    err = capsys.readouterr().err
    assert "FAILED ref 101: PoorAlignmentError" in err and "below min_placed_share 0.5" in err
    # without the threshold the talk is aligned, and reported as mostly unplaced
    write_params(params, iwslt)
    assert align_stage.main(args) == 0
    out = capsys.readouterr().out
    assert "WARNING 101: only" in out
    report = json.loads((tmp_path / "alignment.json").read_text())
    assert [t["talk"] for t in report["splits"]["ref"]["talks_mostly_unplaced"]] == ["101"]

    # features: a talk whose alignment no longer matches its tokens fails alone, and the stage exits 1
    (tmp_path / "alignments" / "ref" / "102.parquet").write_bytes(
        (tmp_path / "alignments" / "ref" / "101.parquet").read_bytes())
    meta = json.loads((tmp_path / "alignments" / "ref" / "102.json").read_text())
    meta["fingerprint"] = "changed"
    (tmp_path / "alignments" / "ref" / "102.json").write_text(json.dumps(meta))
    assert features_stage.main(["--params", str(params), "--quiet", "--alignments", str(tmp_path / "alignments"),
                                 "--audio", str(audio), "--prepared", str(prepared), "--out", str(tmp_path / "ac"),
                                 "--metrics", str(tmp_path / "acoustic.json"),
                                 "--report", str(tmp_path / "audio_report.md")]) == 1
    assert "FAILED ref 102:" in capsys.readouterr().err
    assert (tmp_path / "ac" / "ref" / "features.npy").is_file() and (tmp_path / "audio_report.md").is_file()


def test_the_synthesize_stage_exits_1_when_a_talk_fails(ref_audio, tmp_path, capsys):
    from pipeline import synthesize as synthesize_stage

    root, prepared, iwslt = ref_audio
    real = tmp_path / "real"
    real.mkdir()
    data = (root / "audio" / "ref" / "101.wav").read_bytes()
    (real / "101.wav").write_bytes(data[: len(data) // 2])  # a recording cut short
    (real / "102.wav").write_bytes(data)
    params = write_params(tmp_path / "params.yaml", iwslt)
    settings = yaml.safe_load(params.read_text())
    settings["audio"].update(source="real", real_audio_dir=str(real))
    params.write_text(yaml.safe_dump(settings))
    assert synthesize_stage.main(["--params", str(params), "--quiet", "--prepared", str(prepared),
                                  "--out", str(tmp_path / "audio"), "--metrics", str(tmp_path / "audio.json")]) == 1
    err = capsys.readouterr().err
    assert "FAILED ref 101:" in err and "truncated" in err
    report = json.loads((tmp_path / "audio.json").read_text())
    assert report["splits"]["ref"]["talks_with_audio"] == 1
