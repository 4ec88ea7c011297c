"""Per-token prosodic features and MFCC frames (audio/features.py), on synthetic signals made here."""

from __future__ import annotations

import numpy as np
import pytest

soundfile = pytest.importorskip("soundfile", reason="soundfile is not installed (pip install soundfile)")
pytest.importorskip("librosa", reason="librosa is not installed (pip install librosa)")

from audio.features import (  # noqa: E402
    FEATURE_NAMES,
    NEUTRAL_VALUES,
    AudioFeatureError,
    FeatureJob,
    extract_features,
    talk_features,
)
from corpus.frames import RaggedFrames  # noqa: E402
from corpus.timings import WordTiming, write_engine_timings as write_timings  # noqa: E402

SR = 16000
COL = {name: i for i, name in enumerate(FEATURE_NAMES)}


def tone(f0: float, seconds: float, sr: int = SR, amplitude: float = 0.3) -> np.ndarray:
    """A voiced-like periodic signal: fundamental plus two harmonics."""
    t = np.arange(int(seconds * sr)) / sr
    wave = np.sin(2 * np.pi * f0 * t) + 0.5 * np.sin(4 * np.pi * f0 * t) + 0.25 * np.sin(6 * np.pi * f0 * t)
    return (amplitude * wave / 1.75).astype(np.float32)


def glide(f_start: float, f_end: float, seconds: float, sr: int = SR) -> np.ndarray:
    """Exponential sweep: the pitch in semitones rises linearly in time."""
    t = np.arange(int(seconds * sr)) / sr
    k = np.log(f_end / f_start) / seconds
    phase = 2 * np.pi * f_start * (np.exp(k * t) - 1) / k
    return (0.3 * np.sin(phase)).astype(np.float32)


def silence(seconds: float) -> np.ndarray:
    return np.zeros(int(seconds * SR), np.float32)


def _talk(tmp_path, name="talk.wav", sr=SR):
    """0.1 s silence | 150 Hz 0.4 s | 0.2 s silence | 200 Hz 0.4 s | noise 0.3 s | 0.1 s silence."""
    rng = np.random.default_rng(0)
    noise = (0.2 * rng.standard_normal(int(0.3 * SR))).astype(np.float32)
    parts = [silence(0.1), tone(150, 0.4), silence(0.2), tone(200, 0.4), noise, silence(0.1)]
    audio = np.concatenate(parts)
    if sr != SR:
        import librosa

        audio = librosa.resample(audio, orig_sr=SR, target_sr=sr)
    path = tmp_path / name
    soundfile.write(path, audio, sr)
    timings = [
        WordTiming("low", 0.1, 0.5, True),
        WordTiming("high", 0.7, 1.1, True),
        WordTiming("noise", 1.1, 1.4, True),
    ]
    return path, timings


def test_known_f0_pauses_and_durations(tmp_path):
    path, timings = _talk(tmp_path)
    result = talk_features(path, timings)
    v, m = result.values, result.missing
    assert v.shape == m.shape == (3, len(FEATURE_NAMES)) and v.dtype == np.float32
    # The talk's reference f0 is the median of its voiced frames (between 150 and 200 Hz); the difference
    # between the two words is the known interval, 12 * log2(200 / 150) = 4.98 semitones.
    assert 145 <= result.stats["reference_f0_hz"] <= 205
    assert v[1, COL["f0_mean"]] - v[0, COL["f0_mean"]] == pytest.approx(12 * np.log2(200 / 150), abs=0.1)
    reference = result.stats["reference_f0_hz"]
    assert reference * 2 ** (v[0, COL["f0_mean"]] / 12) == pytest.approx(150, rel=0.01)
    assert v[0, COL["f0_range"]] < 0.3 and abs(v[0, COL["f0_slope"]]) < 0.5
    assert v[0, COL["voiced_fraction"]] > 0.9
    # Noise is not voiced: its f0 is flagged missing (neutral value), not invented.
    assert v[2, COL["voiced_fraction"]] < 0.2
    assert m[2, COL["f0_mean"]] and m[2, COL["f0_range"]] and m[2, COL["f0_slope"]]
    assert v[2, COL["f0_mean"]] == NEUTRAL_VALUES["f0_mean"]
    # Pauses and durations from the timings.
    assert v[0, COL["pause_after"]] == pytest.approx(0.2) and v[1, COL["pause_before"]] == pytest.approx(0.2)
    assert v[1, COL["pause_after"]] == pytest.approx(0.0) and v[2, COL["pause_before"]] == pytest.approx(0.0)
    assert m[0, COL["pause_before"]] and m[2, COL["pause_after"]]  # no word before the first / after the last
    assert v[:, COL["duration"]] == pytest.approx([0.4, 0.4, 0.3])
    assert v[:, COL["duration_norm"]] == pytest.approx(np.array([0.4, 0.4, 0.3]) / (1.1 / 3), rel=1e-5)
    # Energy relative to the talk's median word level: the noise burst (rms 0.2) is the loudest.
    assert v[2, COL["energy_db"]] > v[0, COL["energy_db"]]
    assert not m[:, COL["energy_db"]].any()


def test_pitch_glide_slope(tmp_path):
    audio = np.concatenate([silence(0.1), glide(120, 240, 0.5), silence(0.1)])
    soundfile.write(tmp_path / "g.wav", audio, SR)
    result = talk_features(tmp_path / "g.wav", [WordTiming("rise", 0.15, 0.55, True)])
    # One octave in 0.5 s = 24 semitones per second.
    assert result.values[0, COL["f0_slope"]] == pytest.approx(24.0, rel=0.1)
    assert result.values[0, COL["f0_range"]] == pytest.approx(12 * 0.4 / 0.5, abs=1.5)


def test_missing_timings_are_flagged_never_nan(tmp_path):
    path, timings = _talk(tmp_path)
    timings = [
        timings[0],
        WordTiming("lost", 0.0, 0.0, False),  # the aligner found no span
        timings[1],
        WordTiming("bad", 1.0, 9.0, True),  # ends long after the audio: invalid, treated as missing
        WordTiming("nan", float("nan"), 1.2, True),
        timings[2],
    ]
    result = talk_features(path, timings)
    v, m = result.values, result.missing
    assert np.all(np.isfinite(v))
    for row in (1, 3, 4):
        assert m[row].all()
        assert v[row, COL["duration_norm"]] == 1.0 and v[row, COL["pause_before"]] == 0.0
    assert result.stats["invalid_timings"] == 2 and result.stats["invalid_timing_indices"] == [3, 4]
    # Neighbours of a missing token lose the pause on that side only.
    assert m[0, COL["pause_after"]] and m[2, COL["pause_before"]] and m[2, COL["pause_after"]]
    assert not m[0, COL["duration"]] and not m[2, COL["f0_mean"]]
    assert result.mfcc.token(1).shape == (0, 13)


def test_resampling_and_stereo_input(tmp_path):
    path, timings = _talk(tmp_path, "cd.wav", sr=44100)
    direct = talk_features(_talk(tmp_path, "direct.wav")[0], timings)
    result = talk_features(path, timings)
    assert result.stats["resampled_from"] == 44100 and result.stats["duration"] == pytest.approx(1.5, abs=1e-3)
    assert np.allclose(result.values[:, COL["f0_mean"]], direct.values[:, COL["f0_mean"]], atol=0.1)
    stereo = tmp_path / "stereo.wav"
    mono, _ = soundfile.read(str(tmp_path / "direct.wav"), dtype="float32")
    soundfile.write(stereo, np.stack([mono, mono], axis=1), SR)
    assert talk_features(stereo, timings).stats["channels"] == 2


def test_mfcc_store_offsets(tmp_path):
    path, timings = _talk(tmp_path)
    timings = [*timings, WordTiming("blip", 1.4, 1.403, True), WordTiming("gone", 1.403, 1.403, False)]
    result = talk_features(path, timings)
    store = result.mfcc
    assert store.values.dtype == np.float32 and store.values.shape[1] == 13
    assert store.offsets[0] == 0 and store.offsets[-1] == len(store.values) and len(store) == len(timings)
    counts = np.diff(store.offsets)
    assert abs(counts[0] - 40) <= 1 and abs(counts[2] - 30) <= 1  # 10 ms frames in 0.4 s and 0.3 s
    assert counts[3] == 1 and counts[4] == 0  # a 3 ms word still gets one frame; no timing, no frames
    prefix = tmp_path / "store" / "ref"
    store.save(prefix)
    loaded = RaggedFrames.load(prefix)
    assert np.array_equal(loaded.offsets, store.offsets) and np.array_equal(loaded.token(2), store.token(2))
    both = RaggedFrames.concatenate([store, store])
    assert len(both) == 2 * len(store) and np.array_equal(both.token(len(store) + 2), store.token(2))
    with pytest.raises(ValueError):
        RaggedFrames(store.values, store.offsets[:-2])  # does not end at len(values)


def test_bad_audio_gives_clear_errors_and_batches_carry_on(tmp_path):
    path, timings = _talk(tmp_path)
    soundfile.write(tmp_path / "silent.wav", silence(1.0), SR)
    soundfile.write(tmp_path / "empty.wav", np.zeros(0, np.float32), SR)
    (tmp_path / "corrupt.wav").write_bytes(b"RIFF\x00\x00garbage" * 10)
    cases = {"absent.wav": "file not found", "silent.wav": "silent", "empty.wav": "empty", "corrupt.wav": "unreadable"}
    for name, reason in cases.items():
        with pytest.raises(AudioFeatureError, match=reason) as error:
            talk_features(tmp_path / name, timings)
        assert str(error.value).startswith(str(tmp_path / name))

    write_timings(tmp_path / "t.timings.tsv", timings)
    jobs = [
        FeatureJob("good", 3, path, tmp_path / "t.timings.tsv"),
        FeatureJob("broken", 2, tmp_path / "corrupt.wav", timings[:2]),
        FeatureJob("short", 4, path, timings),  # 3 timings for 4 tokens
        FeatureJob("again", 3, path, timings),
    ]
    report = extract_features(jobs, tmp_path / "out" / "ref")
    assert [f["talk"] for f in report["failed"]] == ["broken", "short"]
    assert "corrupt.wav: unreadable" in report["failed"][0]["error"]
    assert "3 timings for 4 tokens" in report["failed"][1]["error"]
    values = np.load(tmp_path / "out" / "ref.features.npy")
    missing = np.load(tmp_path / "out" / "ref.missing.npy")
    assert values.shape == missing.shape == (12, len(FEATURE_NAMES)) and np.all(np.isfinite(values))
    assert missing[3:9].all() and not missing[0, COL["duration"]]
    assert np.array_equal(values[0:3], values[9:12])
    store = RaggedFrames.load(tmp_path / "out" / "ref")
    assert len(store) == 12 and np.all(np.diff(store.offsets)[3:9] == 0)


def test_the_talk_cache_is_keyed_by_the_numeric_regime(tmp_path, monkeypatch):
    """The features stage keeps a talk's arrays under a fingerprint that holds the numeric regime: a rerun in
    another regime computes the talk again (its bits may differ) instead of mixing it with talks of this one;
    pinned, the key is the floor alone, the same on every CPU of it."""
    import dataclasses
    import json

    from audio import features_stage
    from audio.features import FeatureConfig
    from corpus.timings import write_alignment_table
    from experiments import numerics

    path, timings = _talk(tmp_path)
    parquet = write_alignment_table(timings, "talk", tmp_path / "talk.parquet")
    config = FeatureConfig()
    task = features_stage._Task("ref", "talk", str(path), str(parquet), "alignment-fingerprint",
                                tuple(t.word for t in timings), str(tmp_path / "talks"),
                                {"config": dataclasses.asdict(config)}, config, len(FEATURE_NAMES))
    (tmp_path / "talks").mkdir()
    meta = tmp_path / "talks" / "talk.json"
    assert features_stage._feature_task(task)["status"] == "computed"
    here = numerics.numeric_regime()
    assert json.loads(meta.read_text())["numerics"] == here
    assert features_stage._feature_task(task)["status"] == "cached"
    if here == numerics.FLOOR:  # pinned: another CPU of the floor finds the same key
        monkeypatch.setattr(numerics, "cpu_model", lambda: "Intel(R) Xeon(R) Platinum 8375C CPU @ 2.90GHz")
        assert features_stage._feature_task(task)["status"] == "cached"
    monkeypatch.setattr(features_stage, "numeric_regime", lambda: "native:PUNCTUATION_NATIVE_NUMERICS is set; a CPU")
    assert features_stage._feature_task(task)["status"] == "computed"
    assert json.loads(meta.read_text())["numerics"] == "native:PUNCTUATION_NATIVE_NUMERICS is set; a CPU"
    monkeypatch.undo()
    assert features_stage._feature_task(task)["status"] == "computed"  # back in this regime: computed again
