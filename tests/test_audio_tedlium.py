"""TED-LIUM as the talks' audio (audio.source: tedlium) on a sample in TED-LIUM's layout made by the test
(tests/fixture_tedlium.py: flite speech as NIST SPHERE, STM segments at the engine's word times): recordings matched
to the prepared talks by speaker name and text, unmatched ones reported, the punctuated tokens aligned with the
STM anchors, features; resuming; a bad recording; the stage wrappers; and `dvc repro` of the audio stages."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import yaml

soundfile = pytest.importorskip("soundfile", reason="soundfile is not installed")
pytest.importorskip("librosa", reason="librosa is not installed")
pytest.importorskip("pocketsphinx", reason="pocketsphinx is not installed")

from audio.align_stage import align_talks  # noqa: E402
from audio.features import FeatureConfig  # noqa: E402
from audio.features_stage import token_features  # noqa: E402
from audio.reference_speech import flite_available  # noqa: E402
from audio.stage_common import read_alignment  # noqa: E402
from audio.synthesis import talk_stem  # noqa: E402
from audio.synthesize_stage import NO_RECORDING, TEDLIUM_MATCHES, make_talk_audio  # noqa: E402
from audio.tedlium import TedliumConfig, xml_titles  # noqa: E402
from corpus.anchors import read_anchors  # noqa: E402
from corpus.iwslt import read_iwslt  # noqa: E402
from corpus.talks_table import read_talks_table  # noqa: E402
from tests.fixture_tedlium import (RECORDINGS, SOURCES, boundary_errors_ms, write_iwslt_sources,  # noqa: E402
                                   write_prepared, write_ted_talks, write_tedlium)

pytestmark = pytest.mark.skipif(not flite_available(), reason="flite is not installed (apt-get install flite)")

GORE, AMY = "Averting_the_climate_crisis_Al_Gore", "Amy_Smith_Simple_designs_that_could_save_millions_of_childrens'_lives"
HANS = "Hans_Rosling_The_best_stats_you've_ever_seen"
CONFIG = TedliumConfig(min_text_overlap=0.3, anchor_chunk_s=3.0, min_anchor_share=0.5)


def audio_settings(tedlium_dir: Path, **changes):
    settings = dict(source="tedlium", real_audio_dir=None, text="punctuated", voices=["flite:kal16"],
                    rate_range=[1.0, 1.0], pitch_range=[1.0, 1.0], seed=1, max_chunk_tokens=80,
                    dev_pseudo_talk_tokens=8, split_tokens={"ref": None, "dev": None, "train": None},
                    talk_sources=SOURCES, tedlium_dir=tedlium_dir, tedlium=CONFIG)
    settings.update(changes)
    return settings


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    root = tmp_path_factory.mktemp("tedlium")
    references = write_tedlium(root / "TEDLIUM_release-3")
    prepared = write_prepared(root / "prepared", root / "iwslt")
    audio = make_talk_audio(prepared, root / "iwslt", root / "audio", **audio_settings(root / "TEDLIUM_release-3"))
    alignment = align_talks(root / "audio", prepared, root / "alignments", backend="pocketsphinx", backend_config={},
                            workers=2)
    features = token_features(root / "alignments", root / "audio", prepared, root / "acoustic",
                              splits=["ref", "asr", "dev", "train"], config=FeatureConfig(), workers=1)
    return {"root": root, "references": references, "prepared": prepared, "audio": audio, "alignment": alignment,
            "features": features}


def test_recordings_are_matched_by_name_and_text_and_the_rest_reported(built):
    rows = {(r["split"], r["talk"]): r for r in read_talks_table(built["root"] / "audio" / "talks.tsv")}
    for key in (("train", GORE), ("train", AMY), ("ref", "1175")):
        assert rows[key]["status"] == "ok" and rows[key]["voice"] == "tedlium" and rows[key]["action"] == "converted"
        assert rows[key]["duration_s"] > 3
    assert rows[("asr", "1175")]["wav"] == rows[("ref", "1175")]["wav"]  # ASR shares the ref audio
    assert rows[("train", HANS)]["status"] == "excluded" and rows[("train", HANS)]["error"] == NO_RECORDING
    assert all(rows[key]["status"] == "excluded" for key in rows if key[0] == "dev")  # pseudo-talks have no name
    report = built["audio"]["tedlium"]
    assert report["recordings"] == len(RECORDINGS) and report["recordings_matched"] == 3
    assert report["talks_matched"] == {"train": 2, "ref": 1} and report["layout_problems"] == []
    unmatched = {item["recording"]: item["reason"] for item in report["recordings_unmatched"]}
    assert set(unmatched) == {"AlGore_2008", "NobodyKnown_2010"}
    assert "the text of no transcript named after 'algore' matches" in unmatched["AlGore_2008"]
    assert "no transcript is named after the speaker 'nobodyknown'" in unmatched["NobodyKnown_2010"]
    lines = (built["root"] / "audio" / TEDLIUM_MATCHES).read_text().splitlines()
    assert lines[0] == "recording\tstatus\tsplit\ttalk\toverlap\treason"
    assert [line.split("\t")[:4] for line in lines[1:]] == [
        ["AlGore_2006", "used", "train", GORE], ["AlGore_2008", "unmatched", "", ""], ["AmySmith_2006", "used", "train", AMY],
        ["DanielTammet_2011", "used", "ref", "1175"], ["NobodyKnown_2010", "unmatched", "", ""]]
    assert built["audio"]["splits"]["train"]["talks_made_this_run"] == 2 and built["audio"]["failed"] == []
    # the SPH became a 16 kHz WAV holding the same samples
    wav = built["root"] / "audio" / rows[("train", GORE)]["wav"]
    sph = built["root"] / "TEDLIUM_release-3" / "data" / "sph" / "AlGore_2006.sph"
    assert np.array_equal(soundfile.read(str(wav), dtype="int16")[0], soundfile.read(str(sph), dtype="int16")[0])
    assert xml_titles(built["root"] / "iwslt" / SOURCES["ref"]) == {"1175": "Daniel Tammet: Different ways of knowing"}


def test_the_punctuated_tokens_are_aligned_on_the_recording_with_stm_anchors(built):
    root = built["root"]
    train = read_iwslt(built["prepared"] / "train.tsv")
    for talk, recording in ((GORE, "AlGore_2006"), (AMY, "AmySmith_2006")):
        stem = talk_stem(talk)
        chunks = read_anchors(root / "audio" / "train" / f"{stem}.anchors.tsv")
        assert len(chunks) >= 3  # cut at sentence boundaries, chunks of at most ~3 s
        timings, _ = read_alignment(root / "alignments" / "train" / f"{stem}.parquet")
        row = next(r for r in read_talks_table(root / "audio" / "talks.tsv") if r["talk"] == talk)
        assert [t.word for t in timings] == train.words[row["first_token"] : row["first_token"] + row["tokens"]]
        assert sum(t.aligned for t in timings) >= len(timings) - 1
        for chunk in chunks:  # every word inside its chunk's span
            for timing in timings[chunk.first : chunk.stop]:
                assert chunk.start - 1e-6 <= timing.start <= timing.end <= chunk.end + 1e-6
        errors = boundary_errors_ms(built["references"][recording], timings)
        assert np.median(errors) < 30 and np.mean(errors <= 50) > 0.85, talk
        meta = json.loads((root / "alignments" / "train" / f"{stem}.json").read_text())
        assert meta["anchor_chunks"] == len(chunks)
    splits = built["alignment"]["splits"]
    assert splits["train"]["talks_aligned"] == 2 and splits["ref"]["share_aligned"] > 0.9
    assert splits["asr"]["timing_sources"]["own"] > 0 and built["alignment"]["failed"] == []
    features = built["features"]["splits"]["train"]
    has_audio = np.load(root / "acoustic" / "train" / "has_audio.npy")
    hans = next(r for r in read_talks_table(root / "audio" / "talks.tsv") if r["talk"] == HANS)
    assert hans["first_token"] + hans["tokens"] == len(has_audio) == len(train.words)
    assert has_audio[: hans["first_token"]].all() and not has_audio[hans["first_token"] :].any()  # no recording
    assert features["talks"]["computed_this_run"] == 2 and features["talks"]["no_audio"] == 1
    assert features["timed_share_of_tokens_with_audio"] > 0.95


def test_a_rerun_reuses_everything_and_a_changed_stm_redoes_that_talk(built, tmp_path):
    root = built["root"]
    for name in ("TEDLIUM_release-3", "prepared", "iwslt", "audio", "alignments"):
        shutil.copytree(root / name, tmp_path / name)
    again = make_talk_audio(tmp_path / "prepared", tmp_path / "iwslt", tmp_path / "audio",
                            **audio_settings(tmp_path / "TEDLIUM_release-3"))
    assert all(info["talks_made_this_run"] == 0 for info in again["splits"].values())
    assert again["splits"]["train"]["talks_reused_this_run"] == 2
    stm = tmp_path / "TEDLIUM_release-3" / "data" / "stm" / "AmySmith_2006.stm"
    lines = stm.read_text().splitlines()
    stm.write_text("\n".join(line for line in lines if "two million" not in line) + "\n")  # one segment less
    changed = make_talk_audio(tmp_path / "prepared", tmp_path / "iwslt", tmp_path / "audio",
                              **audio_settings(tmp_path / "TEDLIUM_release-3"))
    assert changed["splits"]["train"]["talks_made_this_run"] == 1 and changed["splits"]["ref"]["talks_reused_this_run"] == 1
    aligned = align_talks(tmp_path / "audio", tmp_path / "prepared", tmp_path / "alignments", backend="pocketsphinx",
                          backend_config={}, workers=1)
    assert {split: info["talks_aligned_this_run"] for split, info in aligned["splits"].items()} == {
        "ref": 0, "asr": 0, "train": 1, "dev": 0}  # the anchors changed: only that talk
    # switching back to synthetic speech leaves no TED-LIUM anchors behind
    synthetic = make_talk_audio(tmp_path / "prepared", tmp_path / "iwslt", tmp_path / "audio",
                                **audio_settings(None, source="synthesize", tedlium=None,
                                                 split_tokens={"train": None}))
    assert synthetic["splits"]["train"]["talks_made_this_run"] == 3
    assert not list((tmp_path / "audio" / "train").glob("*.anchors.tsv"))
    assert not list((tmp_path / "audio" / "train").glob("*.tedlium.json"))


def test_a_bad_recording_fails_its_talk_alone(built, tmp_path):
    shutil.copytree(built["root"] / "TEDLIUM_release-3", tmp_path / "tedlium")
    sph = tmp_path / "tedlium" / "data" / "sph" / "AmySmith_2006.sph"
    sph.write_bytes(b"NIST_1A\n   1024\n" + bytes(200))
    (tmp_path / "tedlium" / "data" / "stm" / "Orphan_2001.stm").write_text("", encoding="utf-8")
    report = make_talk_audio(built["prepared"], built["root"] / "iwslt", tmp_path / "audio",
                             **audio_settings(tmp_path / "tedlium"))
    assert [(f["split"], f["talk"]) for f in report["failed"]] == [("train", AMY)]
    assert "AmySmith_2006.sph" in report["failed"][0]["error"] and "recording AmySmith_2006" in report["failed"][0]["error"]
    assert report["splits"]["train"]["talks_with_audio"] == 1 and report["splits"]["ref"]["talks_with_audio"] == 1
    assert any("Orphan_2001.stm: no audio file" in problem for problem in report["tedlium"]["layout_problems"])
    with pytest.raises(ValueError, match="needs tedlium_dir"):
        make_talk_audio(built["prepared"], built["root"] / "iwslt", tmp_path / "x",
                        **audio_settings(None, tedlium=None))


def write_params(path: Path, tedlium: Path) -> Path:
    params = yaml.safe_load((Path(__file__).resolve().parents[1] / "params.yaml").read_text())
    params["audio"].update(source="tedlium", tedlium_dir=str(tedlium), voices=["flite:kal16"],
                           split_tokens={"ref": None, "dev": 0, "train": None}, dev_pseudo_talk_tokens=8,
                           talk_sources=SOURCES, tedlium={"min_text_overlap": 0.3, "anchor_chunk_s": 3.0,
                                                          "min_anchor_share": 0.5})
    params["align"].update(workers=2, scheduler=None)
    params["features"].update(workers=1, scheduler=None, splits=["ref", "asr", "train"])
    path.write_text(yaml.safe_dump(params), encoding="utf-8")
    return path


def test_the_stage_wrappers_read_the_tedlium_source_from_params(built, tmp_path, capsys):
    from pipeline import align as align_stage
    from pipeline import features as features_stage
    from pipeline import synthesize as synthesize_stage

    root = built["root"]
    params = write_params(tmp_path / "params.yaml", root / "TEDLIUM_release-3")
    settings = yaml.safe_load(params.read_text())
    settings["data"]["iwslt_dir"] = str(root / "iwslt")
    params.write_text(yaml.safe_dump(settings))
    common = ["--params", str(params), "--quiet", "--prepared", str(built["prepared"])]
    assert synthesize_stage.main([*common, "--out", str(tmp_path / "audio"),
                                  "--metrics", str(tmp_path / "audio.json")]) == 0
    out = capsys.readouterr().out
    assert "TED-LIUM" in out and "3 of 5 recordings matched" in out and "unmatched NobodyKnown_2010" in out
    assert align_stage.main([*common, "--audio", str(tmp_path / "audio"), "--out", str(tmp_path / "al"),
                             "--metrics", str(tmp_path / "al.json")]) == 0
    assert "(2 local processes)" in capsys.readouterr().out
    assert features_stage.main([*common, "--audio", str(tmp_path / "audio"), "--alignments", str(tmp_path / "al"),
                                "--out", str(tmp_path / "ac"), "--metrics", str(tmp_path / "ac.json"),
                                "--report", str(tmp_path / "audio_report.md")]) == 0
    assert json.loads((tmp_path / "ac.json").read_text())["splits"]["train"]["tokens_with_audio"] > 0
    report = (tmp_path / "audio_report.md").read_text()
    assert "TED-LIUM" in report and "3 of 5 recordings matched" in report and "NobodyKnown_2010 (no transcript" in report
    settings["audio"]["tedlium"]["typo"] = 1
    params.write_text(yaml.safe_dump(settings))
    from experiments.params import ParamsError

    with pytest.raises(ParamsError, match="audio.tedlium has unknown settings"):
        synthesize_stage.main([*common, "--out", str(tmp_path / "audio2"), "--metrics", str(tmp_path / "a2.json")])


REPO = Path(__file__).resolve().parents[1]
DVC = Path(sys.executable).with_name("dvc")


@pytest.mark.slow  # a real `dvc repro` of prepare, synthesize, align and features: ~1 min
@pytest.mark.skipif(not DVC.exists(), reason="dvc is not installed next to this Python")
def test_dvc_repro_of_the_audio_stages_on_the_tedlium_sample(built, tmp_path):
    from tests.fixture_real_speech import write_real_talks
    from tests.helpers import PACKAGES

    corpus = tmp_path / "corpus"
    write_iwslt_sources(corpus / "iwslt")
    ted = write_ted_talks(corpus / "ted_talks.jsonl.gz")
    shutil.copytree(built["root"] / "TEDLIUM_release-3", corpus / "TEDLIUM_release-3")
    workdir = tmp_path / "project"
    workdir.mkdir()
    for name in ["dvc.yaml", "pyproject.toml", *PACKAGES]:
        source = REPO / name
        if source.is_dir():
            shutil.copytree(source, workdir / name, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            shutil.copy(source, workdir / name)
    params = write_params(workdir / "params.yaml", corpus / "TEDLIUM_release-3")
    settings = yaml.safe_load(params.read_text())
    real = corpus / "ted_real"
    settings["data"].update(iwslt_dir=str(corpus / "iwslt"), ted_talks=str(ted), real_speech_dir=str(real),
                            real_speech_talks=write_real_talks(real), excluded_talks=[],
                            eval_splits={"dev": "dev2012", "ref": "test2011", "asr": "test2011asr"})
    settings["audio"]["real_audio_dir"] = str(corpus / "iwslt")
    settings["profiles"][settings["profile"]]["data"] = {"train_tokens": 100000}
    params.write_text(yaml.safe_dump(settings))
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}",
           "PYTHONPATH": str(workdir)}

    def dvc(*args: str) -> str:
        done = subprocess.run([str(DVC), *args], cwd=workdir, env=env, capture_output=True, text=True)
        assert done.returncode == 0, done.stdout + done.stderr
        return done.stdout + done.stderr

    subprocess.run(["git", "init", "-q"], cwd=workdir, check=True)
    dvc("init", "-q")
    dvc("config", "core.autostage", "false")
    output = dvc("repro", "features")
    ran = {line.split("'")[1] for line in output.splitlines() if line.startswith("Running stage")}
    assert ran == {"prepare", "synthesize", "align", "features"}
    audio = json.loads((workdir / "metrics" / "audio.json").read_text())
    assert audio["source"] == "tedlium" and audio["tedlium"]["recordings_matched"] == 3
    assert audio["splits"]["train"]["talks_with_audio"] == 2 and audio["splits"]["ref"]["talks_with_audio"] == 1
    alignment = json.loads((workdir / "metrics" / "alignment.json").read_text())
    assert alignment["splits"]["train"]["talks_aligned"] == 2 and alignment["splits"]["train"]["share_aligned"] > 0.9
    acoustic = json.loads((workdir / "metrics" / "acoustic.json").read_text())
    assert acoustic["splits"]["train"]["tokens_with_audio"] > 50
    assert "Source: **tedlium**" in (workdir / "reports" / "audio_report.md").read_text()
    assert (workdir / "data" / "audio" / TEDLIUM_MATCHES).is_file()
    # the worker count is not an input: changing it reruns nothing
    settings["align"]["workers"] = 1
    params.write_text(yaml.safe_dump(settings))
    assert "Running stage" not in dvc("repro", "features")


def test_dvc_yaml_tracks_the_tedlium_folder_and_not_the_worker_count():
    stages = yaml.safe_load((REPO / "dvc.yaml").read_text())["stages"]
    params = yaml.safe_load((REPO / "params.yaml").read_text())
    assert "${audio.tedlium_dir}" in stages["synthesize"]["deps"] and "audio" in stages["synthesize"]["params"]
    assert params["audio"]["tedlium_dir"] == params["data"]["iwslt_dir"]  # exists whenever the data does
    assert set(params["audio"]["tedlium"]) == {"min_text_overlap", "anchor_chunk_s", "min_anchor_share"}
    TedliumConfig(**params["audio"]["tedlium"])
    assert params["audio"]["tedlium"]["anchor_chunk_s"] <= params["align"]["config"]["max_single_pass_s"]
    for stage, tracked in (("align", ["align.backend", "align.config"]),
                           ("features", ["features.splits", "features.config"])):
        assert stages[stage]["params"] == tracked
        assert params[stage]["workers"] is None and params[stage]["scheduler"] is None  # every core, no cluster
