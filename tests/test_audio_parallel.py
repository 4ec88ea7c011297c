"""The align and features stages through the executor (executor.tasks): the same bytes in every output with 1 or 2
local worker processes and on a Dask LocalCluster, and reports that differ only in run facts (times, the engine). On the
TED-LIUM sample (anchored alignment; ASR talks inheriting from the ref alignment in a second round)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

pytest.importorskip("soundfile", reason="soundfile is not installed")
pytest.importorskip("librosa", reason="librosa is not installed")
pytest.importorskip("pocketsphinx", reason="pocketsphinx is not installed")

from audio.align_stage import align_talks  # noqa: E402
from audio.features import FeatureConfig  # noqa: E402
from audio.features_stage import token_features  # noqa: E402
from audio.reference_speech import flite_available  # noqa: E402
from audio.synthesize_stage import make_talk_audio  # noqa: E402
from tests.fixture_dask import local_cluster  # noqa: E402
from tests.fixture_tedlium import write_prepared, write_tedlium  # noqa: E402
from tests.test_audio_tedlium import audio_settings  # noqa: E402

pytestmark = [pytest.mark.skipif(not flite_available(), reason="flite is not installed (apt-get install flite)"),
              pytest.mark.slow]  # three engines, each starting its worker processes (librosa and numba in each): ~30 s
RUN_FACT = re.compile(r"seconds|per_second|_this_run$|^engine$|^out_dir$")
REPORTS = {"alignment_report.json", "features_report.json", "report.json"}


def without_run_facts(value):  # noqa: ANN001, ANN201
    if isinstance(value, dict):
        return {key: without_run_facts(item) for key, item in value.items() if not RUN_FACT.search(str(key))}
    if isinstance(value, list):
        return [without_run_facts(item) for item in value]
    return value


def files(folder: Path) -> dict[str, bytes]:
    return {path.relative_to(folder).as_posix(): path.read_bytes() for path in sorted(folder.rglob("*"))
            if path.is_file() and path.name not in REPORTS}


def test_align_and_features_give_the_same_bytes_whatever_the_engine(tmp_path):
    import json

    write_tedlium(tmp_path / "tedlium")
    prepared = write_prepared(tmp_path / "prepared", tmp_path / "iwslt")
    make_talk_audio(prepared, tmp_path / "iwslt", tmp_path / "audio", **audio_settings(tmp_path / "tedlium"))
    splits = ["ref", "asr", "dev", "train"]
    reports = {}
    with local_cluster() as scheduler:
        for name, engine in (("one", {"workers": 1}), ("two", {"workers": 2}), ("dask", {"scheduler": scheduler})):
            alignment = align_talks(tmp_path / "audio", prepared, tmp_path / name / "alignments",
                                    backend="pocketsphinx", backend_config={}, **engine)
            features = token_features(tmp_path / name / "alignments", tmp_path / "audio", prepared,
                                      tmp_path / name / "acoustic", splits=splits, config=FeatureConfig(), **engine)
            reports[name] = (alignment, features)
    assert reports["one"][0]["engine"] == "this process" and reports["two"][0]["engine"] == "2 local processes"
    assert reports["dask"][1]["engine"].startswith("dask scheduler tcp://")
    assert reports["one"][0]["failed"] == [] and reports["one"][0]["splits"]["asr"]["timing_sources"]["own"] > 0
    reference = files(tmp_path / "one")
    assert any(key.endswith(".parquet") for key in reference) and any(key.endswith(".npz") for key in reference)
    assert "acoustic/train/features.npy" in reference and "alignments/asr/1175.parquet" in reference
    for name in ("two", "dask"):
        theirs = files(tmp_path / name)
        differing = sorted(key for key in set(reference) | set(theirs) if reference.get(key) != theirs.get(key))
        assert differing == [], f"{name}: these files differ from the one-process run: {differing}"
        for mine, theirs in zip(reports[name], reports["one"]):
            assert without_run_facts(mine) == without_run_facts(theirs)
        assert (json.loads((tmp_path / name / "acoustic" / "train" / "report.json").read_text())["talks"]
                == without_run_facts(reports["one"][1]["splits"]["train"]["talks"]))
