"""The audio half's stages (audio/{synthesize,align,features}_stage.py and pipeline/{synthesize,align,features}.py)
on a tiny corpus.

Two 'test2011' talks (and their ASR transcripts, with an ASR substitution, deletion and insertion), a dev split
cut into two pseudo-talks and two training talks (one beyond the token budget), spoken by flite (a few seconds
each) and aligned by pocketsphinx. Skipped without flite or pocketsphinx.
"""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path

import numpy as np
import pytest
import yaml

soundfile = pytest.importorskip("soundfile", reason="soundfile is not installed")
pytest.importorskip("librosa", reason="librosa is not installed")
pytest.importorskip("pocketsphinx", reason="pocketsphinx is not installed")

from audio.align_stage import align_talks  # noqa: E402
from audio.features import FEATURE_NAMES, FeatureConfig  # noqa: E402
from audio.features_stage import token_features  # noqa: E402
from audio.reference_speech import flite_available  # noqa: E402
from audio.synthesize_stage import make_talk_audio  # noqa: E402
from corpus.frames import FRAMES_FILE, OFFSETS_FILE, RaggedFrames  # noqa: E402
from corpus.iwslt import read_iwslt, write_iwslt  # noqa: E402
from corpus.talks_table import read_talks_table  # noqa: E402
from corpus.text import normalize_transcript  # noqa: E402
from tests.fixture_corpus import write_train_talks  # noqa: E402

pytestmark = pytest.mark.skipif(not flite_available(), reason="flite is not installed (apt-get install flite)")

REF_DOCS = {
    "101": "Good morning, everyone. Today I want to tell you a story about water. It's a short one.",
    "102": "My grandmother lived near the river. She didn't swim, but she loved the boats.",
}
ASR_DOCS = {  # substitution (a -> the), deletion (a), insertion (well), n't -> not
    "101": "Good morning everyone. Today I want to tell you the story about water. It's short one.",
    "102": "Well my grandmother lived near the river. She did not swim but she loved the boats.",
}
DEV_TEXT = "We went home early. The night was cold and dark. Nobody said a word. Then it rained."
TRAIN_TALKS = {"talk_a": "Hello there, friends. This is the first talk.", "talk_b": "And this one is never spoken."}
XML = ('<?xml version="1.0" encoding="UTF-8"?>\n<mteval><srcset setid="x" srclang="english">\n{docs}\n'
       '</srcset></mteval>\n')
SOURCES = {"ref": "ref.xml", "asr": "asr.xml"}


def _xml(docs: dict[str, str]) -> str:
    body = "\n".join(f'<doc docid="{docid}" genre="lectures">\n<seg id="1"> {text} </seg>\n</doc>'
                     for docid, text in docs.items())
    return XML.format(docs=body)


def write_tiny_corpus(root: Path) -> tuple[Path, Path]:
    """``(prepared_dir, iwslt_dir)`` of the tiny corpus."""
    prepared, iwslt = root / "prepared", root / "iwslt"
    iwslt.mkdir(parents=True)
    (iwslt / SOURCES["ref"]).write_text(_xml(REF_DOCS), encoding="utf-8")
    (iwslt / SOURCES["asr"]).write_text(_xml(ASR_DOCS), encoding="utf-8")
    for split, docs in (("ref", REF_DOCS), ("asr", ASR_DOCS)):
        words, labels = [], []
        for text in docs.values():
            w, l = normalize_transcript(text)
            words += w
            labels += l
        write_iwslt(prepared / f"{split}.tsv", words, labels)
    write_iwslt(prepared / "dev.tsv", *normalize_transcript(DEV_TEXT))
    write_train_talks(prepared, TRAIN_TALKS)
    return prepared, iwslt


def audio_settings(**changes):
    settings = dict(source="synthesize", real_audio_dir=None, text="punctuated", voices=["flite:kal16", "flite:slt"],
                    rate_range=[0.95, 1.05], pitch_range=[0.95, 1.05], seed=5, max_chunk_tokens=80,
                    dev_pseudo_talk_tokens=8, split_tokens={"ref": None, "dev": None, "train": 8},
                    talk_sources=SOURCES)
    settings.update(changes)
    return settings


ALIGN = dict(backend="pocketsphinx", backend_config={})
SPLITS = ["ref", "asr", "dev", "train"]


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    root = tmp_path_factory.mktemp("audio_stage")
    prepared, iwslt = write_tiny_corpus(root)
    audio = make_talk_audio(prepared, iwslt, root / "audio", **audio_settings())
    alignment = align_talks(root / "audio", prepared, root / "alignments", **ALIGN)
    features = token_features(root / "alignments", root / "audio", prepared, root / "acoustic", splits=SPLITS,
                              config=FeatureConfig())
    return {"root": root, "prepared": prepared, "iwslt": iwslt, "audio": audio, "alignment": alignment,
            "features": features}


def _copy(built, tmp_path: Path) -> dict[str, Path]:
    paths = {}
    for name in ("prepared", "iwslt", "audio", "alignments", "acoustic"):
        shutil.copytree(built["root"] / name, tmp_path / name)
        paths[name] = tmp_path / name
    return paths


def test_talk_audio_table_and_report(built):
    rows = read_talks_table(built["root"] / "audio" / "talks.tsv")
    by_split = {split: [r for r in rows if r["split"] == split] for split in SPLITS}
    assert [r["talk"] for r in by_split["ref"]] == ["101", "102"]
    assert [r["talk"] for r in by_split["asr"]] == ["101", "102"]
    assert len(by_split["dev"]) == 2 and all(r["status"] == "ok" for r in by_split["dev"])
    # Ref and ASR share the audio made from the reference text.
    for ref, asr in zip(by_split["ref"], by_split["asr"]):
        assert asr["wav"] == ref["wav"] and asr["action"] == "shared" and ref["action"] == "made"
        assert (built["root"] / "audio" / ref["wav"]).is_file() and ref["duration_s"] > 1.0
        assert ref["voice"] in ("flite:kal16", "flite:slt")
    assert [(r["talk"], r["status"]) for r in by_split["train"]] == [("talk_a", "ok"), ("talk_b", "excluded")]
    assert "budget of 8 tokens" in by_split["train"][1]["error"]
    report = built["audio"]
    assert report["splits"]["train"]["talks_excluded"] == 1 and report["failed"] == []
    assert report["hours_total"] == pytest.approx(
        sum(r["duration_s"] for r in rows if r["status"] == "ok" and r["split"] != "asr") / 3600, abs=1e-4)
    assert report["splits"]["asr"]["shares_audio_with"] == "ref"


def test_alignment_outputs_and_error_against_engine_timings(built):
    report = built["alignment"]
    root = built["root"] / "alignments"
    for split in ("ref", "asr", "dev", "train"):
        info = report["splits"][split]
        assert info["talks_aligned"] == info["talks_with_audio"] and not info["talks_failed"]
    assert (root / "ref" / "101.parquet").is_file() and (root / "ref" / "101.TextGrid").is_file()
    assert report["splits"]["ref"]["share_aligned"] > 0.8
    error = report["boundary_error"]["all"]
    assert error["n"] > 40 and error["median_ms"] < 40 and error["within_50ms"] > 0.7
    assert report["boundary_error"]["pause"]["n"] > 0 and report["boundary_error"]["junction"]["n"] > 0
    assert report["splits"]["dev"]["boundary_error"]["all"]["n"] > 0


def test_every_asr_token_has_a_timing_or_an_explicit_flag(built):
    import pandas as pd

    asr_words = read_iwslt(built["prepared"] / "asr.tsv").words
    tables = [pd.read_parquet(built["root"] / "alignments" / "asr" / f"{talk}.parquet") for talk in ("101", "102")]
    table = pd.concat(tables)
    assert list(table["word"]) == asr_words
    assert set(table["source"]) <= {"own", "inherited", "none"}
    timed = table[table["source"] != "none"]
    assert timed["aligned"].all() and np.isfinite(timed[["start", "end"]].to_numpy()).all()
    assert not table[table["source"] == "none"]["aligned"].any()
    counts = built["alignment"]["splits"]["asr"]["timing_sources"]
    assert sum(counts.values()) == len(asr_words) and counts["own"] > len(asr_words) // 2



def test_features_cover_the_whole_split_with_a_mask(built):
    root = built["root"] / "acoustic"
    for split in SPLITS:
        n = len(read_iwslt(built["prepared"] / f"{split}.tsv").words)
        values = np.load(root / split / "features.npy")
        missing = np.load(root / split / "missing.npy")
        has_audio = np.load(root / split / "has_audio.npy")
        assert values.shape == missing.shape == (n, len(FEATURE_NAMES)) and values.dtype == np.float32
        assert np.isfinite(values).all()
        assert json.loads((root / split / "feature_names.json").read_text()) == list(FEATURE_NAMES)
        mfcc = RaggedFrames(np.load(root / split / FRAMES_FILE), np.load(root / split / OFFSETS_FILE))
        assert len(mfcc) == n
        assert missing[~has_audio].all()  # no audio: every feature flagged
        for index in np.flatnonzero(~has_audio):
            assert len(mfcc.token(index)) == 0
        timed = ~missing[:, FEATURE_NAMES.index("duration")]
        assert all(len(mfcc.token(i)) > 0 for i in np.flatnonzero(timed))
    train_audio = np.load(root / "train" / "has_audio.npy")
    first = len(normalize_transcript(TRAIN_TALKS["talk_a"])[0])
    assert train_audio[:first].all() and not train_audio[first:].any()  # talk_b is beyond the budget
    info = built["features"]["splits"]["ref"]
    assert info["coverage_audio"] == 1.0 and info["coverage_timed"] > 0.8


def _tree_digest(folder: Path) -> dict[str, str]:
    """Each file's SHA-256; a report's ``out_dir`` aside (this test reruns in a copy: the folder's name differs)."""
    def content(path: Path) -> bytes:
        if path.name.endswith("report.json"):
            return json.dumps({k: v for k, v in json.loads(path.read_text()).items() if k != "out_dir"}).encode()
        return path.read_bytes()
    return {str(path.relative_to(folder)): hashlib.sha256(content(path)).hexdigest()
            for path in sorted(folder.rglob("*")) if path.is_file()}


def test_rerun_skips_finished_talks_and_redoes_a_changed_one(built, tmp_path):
    paths = _copy(built, tmp_path)
    before = {name: _tree_digest(paths[name]) for name in ("audio", "alignments", "acoustic")}
    again = make_talk_audio(paths["prepared"], paths["iwslt"], paths["audio"], **audio_settings())
    assert all(info["talks_made_this_run"] == 0 for info in again["splits"].values())
    aligned = align_talks(paths["audio"], paths["prepared"], paths["alignments"], **ALIGN)
    assert all(info["talks_aligned_this_run"] == 0 for info in aligned["splits"].values())
    assert aligned["boundary_error"] == built["alignment"]["boundary_error"]  # the report is rebuilt from outputs
    features = token_features(paths["alignments"], paths["audio"], paths["prepared"], paths["acoustic"],
                              splits=SPLITS, config=FeatureConfig())
    assert all(info["talks"]["computed_this_run"] == 0 for info in features["splits"].values())
    # a resumed run leaves the same bytes as the run that made everything (DVC hashes these folders)
    after = {name: _tree_digest(paths[name]) for name in ("audio", "alignments", "acoustic")}
    assert {f"{name}/{file}" for name in after for file in after[name]
            if after[name][file] != before[name].get(file)} == set()

    # A word of the second dev pseudo-talk changes: only that talk is synthesised, aligned and measured again.
    data = read_iwslt(paths["prepared"] / "dev.tsv")
    words = list(data.words)
    words[-2] = "snowed" if words[-2] != "snowed" else "rained"
    write_iwslt(paths["prepared"] / "dev.tsv", words, data.labels)
    audio = make_talk_audio(paths["prepared"], paths["iwslt"], paths["audio"], **audio_settings())
    assert audio["splits"]["dev"]["talks_made_this_run"] == 1 and audio["splits"]["dev"]["talks_reused_this_run"] == 1
    assert audio["splits"]["ref"]["talks_made_this_run"] == 0
    aligned = align_talks(paths["audio"], paths["prepared"], paths["alignments"], **ALIGN)
    assert aligned["splits"]["dev"]["talks_aligned_this_run"] == 1
    assert sum(info["talks_aligned_this_run"] for info in aligned["splits"].values()) == 1
    features = token_features(paths["alignments"], paths["audio"], paths["prepared"], paths["acoustic"],
                              splits=["dev"], config=FeatureConfig())
    assert features["splits"]["dev"]["talks"]["computed_this_run"] == 1 and features["splits"]["dev"]["talks"]["cached_this_run"] == 1


def test_a_corrupt_or_missing_wav_is_recorded_and_the_others_finish(built, tmp_path):
    paths = _copy(built, tmp_path)
    rows = {(r["split"], r["talk"]): r for r in read_talks_table(paths["audio"] / "talks.tsv")}
    corrupt = paths["audio"] / rows[("ref", "102")]["wav"]
    corrupt.write_bytes(b"RIFF\x10\x00\x00\x00WAVEfmt garbage" + bytes(range(256)))
    (paths["audio"] / rows[("dev", "dev-000")]["wav"]).unlink()
    report = align_talks(paths["audio"], paths["prepared"], paths["alignments"], **ALIGN)
    failed = {(f["split"], f["talk"]) for f in report["failed"]}
    assert failed == {("ref", "102"), ("asr", "102"), ("dev", "dev-000")}
    assert report["splits"]["ref"]["talks_aligned"] == 1 and report["splits"]["dev"]["talks_aligned"] == 1
    assert not (paths["alignments"] / "ref" / "102.json").exists()  # no stale completion marker
    features = token_features(paths["alignments"], paths["audio"], paths["prepared"], paths["acoustic"],
                              splits=["ref"], config=FeatureConfig())
    has_audio = np.load(paths["acoustic"] / "ref" / "has_audio.npy")
    first = rows[("ref", "102")]["first_token"]
    assert has_audio[:first].all() and not has_audio[first:].any()
    assert features["splits"]["ref"]["talks"]["not_aligned"] == 1
    # Synthesis: a talk with nothing to say fails alone.
    data = read_iwslt(paths["prepared"] / "train.tsv")
    words = ["--"] * 4 + list(data.words[4:])
    write_iwslt(paths["prepared"] / "train.tsv", words, data.labels)
    (paths["prepared"] / "train_talks.tsv").write_text("talk\tfirst_token\ttokens\nsilent\t0\t4\n"
                                                       f"rest\t4\t{len(words) - 4}\n")
    audio = make_talk_audio(paths["prepared"], paths["iwslt"], paths["audio"],
                            **audio_settings(split_tokens={"train": None}))
    assert [(f["talk"], "nothing to say" in f["error"]) for f in audio["failed"]] == [("silent", True)]
    assert audio["splits"]["train"]["talks_with_audio"] == 1


def test_real_audio_is_validated_and_copied(built, tmp_path):
    real = tmp_path / "real"
    real.mkdir()
    shutil.copy(built["root"] / "audio" / "ref" / "101.wav", real / "101.wav")
    report = make_talk_audio(built["prepared"], built["iwslt"], tmp_path / "audio",
                             **audio_settings(source="real", real_audio_dir=real, split_tokens={"ref": None}))
    rows = read_talks_table(tmp_path / "audio" / "talks.tsv")
    assert [(r["split"], r["talk"], r["status"]) for r in rows] == [
        ("ref", "101", "ok"), ("ref", "102", "failed"), ("asr", "101", "ok"), ("asr", "102", "failed")]
    assert "102.wav: missing" in rows[1]["error"] and rows[0]["voice"] == "real"
    assert (tmp_path / "audio" / "ref" / "101.wav").is_file()
    assert not (tmp_path / "audio" / "ref" / "101.timings.tsv").exists()  # no ground truth for real audio
    assert report["splits"]["ref"]["talks_with_audio"] == 1
    again = make_talk_audio(built["prepared"], built["iwslt"], tmp_path / "audio",
                            **audio_settings(source="real", real_audio_dir=real, split_tokens={"ref": None}))
    assert again["splits"]["ref"]["talks_reused_this_run"] == 1


def test_stage_wrappers_run_on_a_tiny_params_file(tmp_path):
    from pipeline import align as align_stage
    from pipeline import features as features_stage
    from pipeline import synthesize as synthesize_stage

    prepared, iwslt = write_tiny_corpus(tmp_path / "corpus")
    settings = audio_settings(split_tokens={"ref": None, "dev": 10, "train": 0})
    params = {
        "profile": "tiny", "profiles": {"tiny": {}},
        "data": {"iwslt_dir": str(iwslt)},
        "audio": {**settings, "voices": ["flite:kal16"]},
        "align": {"backend": "pocketsphinx", "config": {"unaligned": "interpolate", "max_frame_score": 40.0},
                  "workers": 1, "scheduler": None},
        "features": {"splits": ["ref", "asr", "dev"], "config": {"min_voiced_frames": 3}, "workers": 1,
                     "scheduler": None},
    }
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(params), encoding="utf-8")
    common = ["--params", str(tmp_path / "params.yaml"), "--quiet"]
    out = {name: tmp_path / name for name in ("audio", "alignments", "acoustic")}
    metrics = {name: tmp_path / "metrics" / f"{name}.json" for name in ("audio", "alignment", "acoustic")}
    assert synthesize_stage.main([*common, "--prepared", str(prepared), "--out", str(out["audio"]),
                                  "--metrics", str(metrics["audio"])]) == 0
    assert align_stage.main([*common, "--audio", str(out["audio"]), "--prepared", str(prepared),
                             "--out", str(out["alignments"]), "--metrics", str(metrics["alignment"])]) == 0
    report = tmp_path / "reports" / "audio_report.md"
    assert features_stage.main([*common, "--alignments", str(out["alignments"]), "--audio", str(out["audio"]),
                                "--prepared", str(prepared), "--out", str(out["acoustic"]),
                                "--metrics", str(metrics["acoustic"]), "--report", str(report)]) == 0
    audio = json.loads(metrics["audio"].read_text())
    assert audio["splits"]["dev"]["talks_with_audio"] == 1 and audio["splits"]["train"]["talks_with_audio"] == 0
    assert json.loads(metrics["alignment"].read_text())["splits"]["ref"]["talks_aligned"] == 2
    acoustic = json.loads(metrics["acoustic"].read_text())
    assert set(acoustic["splits"]) == {"ref", "asr", "dev"}
    text = report.read_text()
    for needle in ("## Alignment", "ASR tokens", "## Acoustic features", "Excluded talks: dev: 1", "train: 2"):
        assert needle in text, needle


def test_no_budget_gives_valid_empty_outputs(tmp_path):
    """split_tokens {} (e.g. a pipeline test without speech engines): every stage runs, features all masked."""
    prepared, iwslt = write_tiny_corpus(tmp_path / "corpus")
    audio = make_talk_audio(prepared, iwslt, tmp_path / "audio", **audio_settings(split_tokens={}))
    assert audio["splits"] == {} and audio["hours_total"] == 0
    aligned = align_talks(tmp_path / "audio", prepared, tmp_path / "alignments", **ALIGN)
    assert aligned["splits"] == {} and aligned["boundary_error"]["all"]["n"] == 0
    features = token_features(tmp_path / "alignments", tmp_path / "audio", prepared, tmp_path / "acoustic",
                              splits=["ref", "dev"], config=FeatureConfig())
    missing = np.load(tmp_path / "acoustic" / "dev" / "missing.npy")
    assert missing.shape == (len(read_iwslt(prepared / "dev.tsv").words), len(FEATURE_NAMES)) and missing.all()
    assert features["splits"]["ref"]["tokens_with_audio"] == 0
