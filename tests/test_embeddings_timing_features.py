"""Timing cues (``embeddings.timing_features``) and the ``pauses`` speech source of the feature cache."""

from __future__ import annotations

import json

import numpy as np
import pytest

from embeddings.speech_sources import PAUSES_FILE, SpeechVectors, speech_fingerprint, validate_speech_spec
from embeddings.sources import SourceSpecError
from embeddings.timing_features import (
    PauseModel,
    encode,
    LOCAL_WINDOW,
    feature_dim,
    local_mean,
    missing_raw,
    token_raw,
    word_cues,
    word_groups,
)

NAN = float("nan")


def test_word_groups_attach_clitics_to_the_word_before():
    tokens = ["i", "do", "n't", "know", "it", "'s", "we", "'re", "here"]
    assert word_groups(tokens).tolist() == [True, False, True, True, False, True, False, True, True]
    assert word_groups([]).tolist() == []


def test_word_cues_pause_duration_and_missing():
    starts = [0.0, 0.5, 0.9, NAN, 2.0, 2.5]
    ends = [0.4, 1.0, 1.2, NAN, 2.6, 2.9]
    cues = word_cues(starts, ends, [3, 4, 2, 5, 3, 3])
    assert cues[0, 0] == pytest.approx(0.1)
    assert cues[1, 0] == 0.0 and cues[4, 0] == 0.0  # the next word starts before this one ends: no pause
    assert cues[:, 2].tolist() == [0, 0, 1, 1, 0, 1]  # missing: an untimed word, the word before it, the last word
    assert (cues[cues[:, 2] > 0, :2] == 0).all()
    # a word held twice as long as another of the same length is log(2) longer relative to the expectation
    held = word_cues([0.0, 1.0, 2.0, 3.0], [0.2, 1.4, 2.1, 3.1], [3, 3, 3, 3])
    assert held[1, 1] - held[0, 1] == pytest.approx(np.log(2))
    with pytest.raises(ValueError):
        word_cues([0.0], [1.0, 2.0], [1])


def test_word_cues_of_an_untimed_stretch_and_a_long_silence():
    # a forced alignment's stretch of unplaced words (Earnings-22: often whole stretches), then 30 s of hold music
    starts = [0.0, 0.5, NAN, NAN, NAN, 2.0, 32.5, 33.0]
    ends = [0.4, 1.0, NAN, NAN, NAN, 2.5, 32.8, 33.2]
    cues = word_cues(starts, ends, [3] * 8)
    assert cues[:, 2].tolist() == [0, 1, 1, 1, 1, 0, 0, 1]  # the word before the stretch too: its pause is unknown
    assert cues[cues[:, 2] > 0, :2].tolist() == [[0.0, 0.0]] * 5  # zeros under the flag, never read as "no pause"
    assert cues[5, 0] == pytest.approx(30.0) and cues[6, 0] == pytest.approx(0.2)  # kept raw; encode clips it


def test_token_raw_puts_the_cues_on_the_last_token():
    is_last = np.array([False, True, True, False, True])  # do n't | know | it 's
    cues = np.array([[0.3, 0.5, 0], [0.0, -0.2, 0], [0.0, 0.0, 1]])
    raw = token_raw(is_last, cues)
    assert raw.dtype == np.float32 and raw.shape == (5, 3)
    assert raw[:, 0].tolist() == pytest.approx([0.0, 0.3, 0.0, 0.0, 0.0])
    assert raw[:, 1].tolist() == pytest.approx([0.0, 0.5, -0.2, 0.0, 0.0])
    assert raw[:, 2].tolist() == [0, 0, 0, 1, 1]  # the inner token shares its word's flag
    with pytest.raises(ValueError):
        token_raw(is_last, cues[:2])
    with pytest.raises(ValueError):
        token_raw(np.array([True, False]), cues[:1])


def test_encode_transforms_clips_and_zeroes_missing():
    raw = np.array([[0.0, 0.0, 0], [0.1, 3.0, 0], [60.0, -5.0, 0], [2.0, 1.0, 1]], np.float32)
    both = encode(raw, ["duration", "pause"])  # order as FEATURES: pause, duration, missing
    assert both.shape == (4, 3) == (4, feature_dim(["pause", "duration"]))
    assert both[:, 0].tolist() == pytest.approx([0.0, np.log(2), np.log1p(50), 0.0])
    assert both[:, 1].tolist() == pytest.approx([0.0, 2.0, -2.0, 0.0])
    assert both[:, 2].tolist() == [0, 0, 0, 1]
    assert encode(raw, ["pause"]).shape == (4, 2)
    assert (encode(missing_raw(3), ["pause"]) == [[0, 1]] * 3).all()
    for bad in ([], ["pitch"], ["pause", "pause"]):
        with pytest.raises(ValueError):
            encode(raw, bad)


def test_local_mean_averages_the_timed_tokens_within_the_window():
    values = np.array([1.0, 2.0, 100.0, 4.0, 5.0])
    timed = np.array([True, True, False, True, True])
    assert local_mean(values, timed, 1).tolist() == pytest.approx([1.5, 1.5, 3.0, 4.5, 4.5])
    assert local_mean(values, timed, 10).tolist() == pytest.approx([3.0] * 5)
    assert local_mean(values, np.zeros(5, bool), 1).tolist() == [0.0] * 5  # no timed token: 0
    assert local_mean(np.zeros(0), np.zeros(0, bool), 3).shape == (0,)


def test_local_cues_read_a_pause_against_the_speaker_s_own_pauses():
    """A slower speaker: every encoded pause longer by one constant. The absolute cues differ, the local ones read
    alike."""
    fast = np.zeros((3 * LOCAL_WINDOW, 3), np.float32)
    fast[:, 0] = np.tile([0.1, 0.1, 0.6], LOCAL_WINDOW)  # a long pause every third word
    slow = fast.copy()
    features = ["pause", "local_pause"]
    assert feature_dim(features) == 3 and feature_dim(["pause", "duration", "local_pause", "local_duration"]) == 5
    encoded_fast = encode(fast, features)
    # the same encoded pauses shifted by a constant (a slower speaker on the log scale): local_pause is unchanged
    shift = 0.7
    slow[:, 0] = (np.expm1(np.log1p(fast[:, 0] / 0.1) + shift) * 0.1).astype(np.float32)
    encoded_slow = encode(slow, features)
    middle = slice(LOCAL_WINDOW, 2 * LOCAL_WINDOW)  # full windows
    assert encoded_slow[middle, 0] - encoded_fast[middle, 0] == pytest.approx(np.full(LOCAL_WINDOW, shift), abs=1e-5)
    assert encoded_slow[middle, 1] == pytest.approx(encoded_fast[middle, 1], abs=1e-5)
    assert encoded_fast[2, 1] > 0 > encoded_fast[0, 1]  # the long pause above the speaker's mean, the short below
    # untimed tokens read 0 and are left out of their neighbours' means
    holes = fast.copy()
    holes[0::5, 2] = 1.0
    with_holes = encode(holes, ["pause", "duration", "local_pause", "local_duration"])
    assert (with_holes[0::5, :4] == 0).all() and (with_holes[0::5, 4] == 1).all()
    timed = holes[:, 2] == 0
    expected = encode(holes, ["pause"])[:, 0] - local_mean(encode(holes, ["pause"])[:, 0], timed, LOCAL_WINDOW)
    assert with_holes[timed, 2] == pytest.approx(expected[timed], abs=1e-6)


def _model(min_pool: int = 30) -> PauseModel:
    rng = np.random.default_rng(0)
    cues_a = np.column_stack([np.zeros(200), rng.normal(0, 0.3, 200), np.zeros(200)])
    labels_a = ["O"] * 200
    marked = np.column_stack([rng.uniform(0.5, 1.0, 60), rng.normal(0.4, 0.1, 60), np.zeros(60)])
    marked[-5:, 2] = 1  # untimed
    labels_b = ["PERIOD"] * 40 + ["COMMA"] * 15 + ["QUESTION"] * 5
    return PauseModel.fit([("a", cues_a, labels_a), ("b", marked, labels_b)], min_pool=min_pool)


def test_fit_pools_per_label_and_missing_rate(tmp_path):
    model = _model()
    assert len(model.pools["O"]) == 200 and len(model.pools["PERIOD"]) == 40
    assert len(model.pools["COMMA"]) + len(model.pools["QUESTION"]) == 15  # 5 of the 20 untimed
    assert model.missing_rate == pytest.approx(5 / 260)
    # rare labels draw from a wider pool: QUESTION (0 timed) from all sentence ends, COMMA (15) from marked words
    assert len(model.pool("QUESTION")) == 40 and len(model.pool("COMMA")) == 55 and len(model.pool("O")) == 200
    summary = model.summary()
    assert summary["PERIOD"]["share_pause_0.2s"] == 1.0 and summary["O"]["share_pause_0.2s"] == 0.0
    loaded = PauseModel.load(model.save(tmp_path / "model.json"))
    assert loaded.missing_rate == model.missing_rate and loaded.talks == ["a", "b"]
    assert np.allclose(loaded.pools["PERIOD"], model.pools["PERIOD"], atol=1e-4)
    data = json.loads((tmp_path / "model.json").read_text())
    data["format"] = 99
    (tmp_path / "bad.json").write_text(json.dumps(data))
    with pytest.raises(ValueError, match="format"):
        PauseModel.load(tmp_path / "bad.json")
    with pytest.raises(ValueError):
        PauseModel.fit([("a", np.zeros((2, 3)), ["O"])])


def _stream(n_sentences: int = 300):
    tokens, labels = [], []
    for index in range(n_sentences):
        tokens += ["we", "do", "n't", "know", "it"]
        labels += ["O", "O", "O", "COMMA" if index % 2 else "O", "PERIOD"]
    return tokens, labels


def test_simulation_is_label_conditioned_seeded_and_the_control_is_not():
    model = _model()
    tokens, labels = _stream()
    labels_array = np.array(labels)
    timed = model.simulate(tokens, labels, conditional=True, seed=4, dropout_fraction=0.0)
    again = model.simulate(tokens, labels, conditional=True, seed=4, dropout_fraction=0.0)
    assert np.array_equal(timed, again)
    present = timed[:, 2] == 0
    assert (timed[present & (labels_array == "PERIOD"), 0] >= 0.5).all()
    assert (timed[present & (labels_array == "O"), 0] == 0).all()
    assert (timed[1::5, :2] == 0).all()  # "do" of "do n't": inside a word
    control = model.simulate(tokens, labels, conditional=False, seed=4, dropout_fraction=0.0)
    assert np.array_equal(control[:, 2], timed[:, 2])  # the same cues are missing
    last = np.zeros(len(tokens), bool)
    last[4::5] = True
    period_pauses = control[last & present, 0]
    assert 0 < np.mean(period_pauses > 0) < 0.6  # drawn regardless of the label: mostly a word without a pause
    assert model.simulate([], [], conditional=True, seed=1).shape == (0, 3)
    with pytest.raises(ValueError):
        model.simulate(tokens, labels[:-1], conditional=True, seed=1)


def test_dropout_removes_whole_stretches():
    model = _model()
    tokens, labels = _stream(2000)
    raw = model.simulate(tokens, labels, conditional=True, seed=9, missing_rate=0.0, dropout_fraction=0.25,
                         dropout_span=100)
    missing = raw[:, 2] > 0
    assert 0.15 < missing.mean() < 0.35
    runs = np.diff(np.flatnonzero(np.diff(np.concatenate([[0], missing.astype(int), [0]]))))[::2]
    assert runs.min() >= 50 - 3 and runs.max() <= 200 + 3  # whole stretches (a run may swallow a word's token)
    assert (raw[missing, :2] == 0).all()


# ----------------------------------------------------------------------------- the speech source


def test_the_pauses_source(tmp_path):
    spec = validate_speech_spec({"type": "pauses", "path": str(tmp_path)})
    assert spec["features"] == ["pause"]
    assert validate_speech_spec({"type": "pauses", "path": "x", "features": ["duration", "pause"]})["features"] \
        == ["pause", "duration"]
    for bad in ({"type": "pauses", "path": "x", "features": ["loudness"]},
                {"type": "speech2vec", "path": "x", "features": ["pause"]}):
        with pytest.raises(SourceSpecError):
            validate_speech_spec(bad)
    raw = np.array([[0.5, 0.2, 0], [0.0, 0.0, 1]], np.float32)
    (tmp_path / "train").mkdir()
    np.save(tmp_path / "train" / PAUSES_FILE, raw)
    source = SpeechVectors({"type": "pauses", "path": str(tmp_path), "features": ["pause", "duration"]})
    assert source.dim == 3 and source.needs_audio
    vectors, has = source.for_split("train", ["a", "b"])
    assert np.allclose(vectors, encode(raw, ["pause", "duration"])) and has.tolist() == [True, False]
    assert np.allclose(source.from_timing(None, 2), [[0, 0, 1], [0, 0, 1]])
    with pytest.raises(SourceSpecError, match="fit_pauses"):
        source.for_split("train", ["a"])
    first = speech_fingerprint(spec, ["train"])
    np.save(tmp_path / "train" / PAUSES_FILE, raw * 2)
    assert speech_fingerprint(spec, ["train"]) != first
    assert speech_fingerprint({**spec, "features": ["pause", "duration"]}, ["train"]) != speech_fingerprint(
        spec, ["train"])
    with pytest.raises(FileNotFoundError):
        speech_fingerprint(spec, ["dev"])
