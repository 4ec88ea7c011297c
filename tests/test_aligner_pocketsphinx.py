"""The pocketsphinx backend on tiny flite-synthesised audio (skipped without flite or pocketsphinx)."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("pocketsphinx", reason="pocketsphinx is not installed (pip install pocketsphinx==5.1.1)")
soundfile = pytest.importorskip("soundfile")

from aligner import AlignConfig, AudioError, WordTiming, align  # noqa: E402
from aligner.pocketsphinx_backend import PocketsphinxBackend  # noqa: E402
from audio.reference_speech import Reference, flite_available, synthesize  # noqa: E402
pytestmark = pytest.mark.skipif(not flite_available(), reason="flite is not installed (apt-get install flite)")

SENTENCE = "So, I don't think the zorblaxian cat is here. It's gone!"
LONGER = (
    "The river was cold that morning. My grandmother said we shouldn't go in. "
    "I didn't listen, of course. The water was freezing, and I ran back home. "
    "She laughed at me for an hour."
)


def boundary_errors(reference: Reference, timings: list[WordTiming]) -> np.ndarray:
    errors = []
    for ref, hyp in zip(reference.timings, timings):
        if ref.has_time and hyp.has_time:
            errors += [abs(hyp.start - ref.start), abs(hyp.end - ref.end)]
    return np.asarray(errors)


def assert_invariants(words: list[str], timings: list[WordTiming]) -> None:
    assert [timing.word for timing in timings] == list(words)
    starts = [timing.start for timing in timings if timing.has_time]
    assert starts == sorted(starts)
    for timing in timings:
        assert timing.has_time or not timing.aligned
        if timing.has_time:
            assert timing.end >= timing.start
        if timing.aligned:
            assert timing.end > 0


@pytest.fixture(scope="module")
def sentence(tmp_path_factory) -> tuple[Path, Reference]:
    path = tmp_path_factory.mktemp("aligner") / "sentence.wav"
    return path, synthesize(SENTENCE, path, voice="slt")


@pytest.fixture(scope="module")
def aligned_sentence(sentence):
    path, reference = sentence
    session = PocketsphinxBackend().session(path, reference.words)
    return session, session.timings(reference.words)


def test_one_timing_per_word_in_order(sentence, aligned_sentence):
    _, reference = sentence
    _, timings = aligned_sentence
    assert reference.words[:4] == ["so", "i", "do", "n't"]
    assert len(timings) == len(reference.words)
    assert_invariants(reference.words, timings)
    assert all(timing.aligned for timing in timings)


def test_boundaries_match_flite_within_50_ms(sentence, aligned_sentence):
    _, reference = sentence
    _, timings = aligned_sentence
    errors = boundary_errors(reference, timings)
    assert len(errors) == 2 * len(reference.words)
    assert np.median(errors) < 0.025, errors
    assert np.mean(errors <= 0.05) >= 0.85, errors
    # the contraction is split inside "don't", near flite's own d-ow|n-t boundary
    do, nt = timings[2], timings[3]
    assert do.end == nt.start and abs(nt.start - reference.timings[3].start) < 0.05


def test_out_of_vocabulary_word_is_pronounced_and_aligned(sentence, aligned_sentence):
    _, reference = sentence
    session, timings = aligned_sentence
    assert "zorblaxian" in session.lexicon.g2p_words
    index = reference.words.index("zorblaxian")
    assert timings[index].aligned
    assert abs(timings[index].start - reference.timings[index].start) < 0.05
    assert abs(timings[index].end - reference.timings[index].end) < 0.05


@pytest.mark.parametrize(("rate", "channels"), [(8000, 1), (44100, 2)])
def test_other_rates_and_stereo_are_resampled(sentence, tmp_path, rate, channels):
    import librosa

    path, reference = sentence
    samples, original = soundfile.read(str(path), dtype="float32")
    converted = librosa.resample(samples, orig_sr=original, target_sr=rate)
    if channels == 2:
        converted = np.stack([converted, 0.5 * converted], axis=1)
    other = tmp_path / f"sentence_{rate}.wav"
    soundfile.write(str(other), converted, rate)
    timings = align(other, reference.words)
    assert_invariants(reference.words, timings)
    errors = boundary_errors(reference, timings)
    assert np.median(errors) < 0.03, errors


def test_bad_audio_raises_a_clear_error(tmp_path):
    words = ["hello"]
    with pytest.raises(AudioError, match="not found.*missing.wav"):
        align(tmp_path / "missing.wav", words)
    empty = tmp_path / "empty.wav"
    empty.write_bytes(b"")
    with pytest.raises(AudioError, match="empty.*empty.wav"):
        align(empty, words)
    corrupt = tmp_path / "corrupt.wav"
    corrupt.write_bytes(b"RIFF\x10\x00\x00\x00WAVEfmt garbage" + bytes(range(256)))
    with pytest.raises(AudioError, match="corrupt.wav"):
        align(corrupt, words)
    silent = tmp_path / "silent.wav"
    soundfile.write(str(silent), np.zeros(16000, dtype=np.float32), 16000)
    with pytest.raises(AudioError, match="silent.*silent.wav"):
        align(silent, words)


def test_wrong_transcript_is_flagged_not_a_crash(sentence):
    path, _ = sentence
    wrong = "the weather in paris was lovely and we walked along the river".split()
    timings = align(path, wrong)
    assert_invariants(wrong, timings)
    assert sum(not timing.aligned for timing in timings) >= len(wrong) // 2


def test_transcript_longer_than_the_audio_leaves_the_rest_unaligned(sentence):
    path, reference = sentence
    words = reference.words * 4
    timings = align(path, words)
    assert_invariants(words, timings)
    assert sum(not timing.aligned for timing in timings) >= len(reference.words) * 2
    assert all(timing.has_time for timing in timings)  # interpolated, never NaN with anchors around
    nan_config = AlignConfig(unaligned="nan")
    unaligned = [t for t in align(path, words, config=nan_config) if not t.aligned]
    assert unaligned and all(math.isnan(t.start) or t.has_time for t in unaligned)


def test_long_audio_is_aligned_in_windows_without_losing_a_word(tmp_path):
    path = tmp_path / "longer.wav"
    reference = synthesize(LONGER, path, voice="slt")
    config = AlignConfig(max_single_pass_s=4.0, window_s=3.0)
    session = PocketsphinxBackend().session(path, reference.words, config=config)
    timings = session.timings(reference.words)
    assert len(session.windows) >= 3, session.windows
    assert sorted(session.placed) == list(range(len(session.units)))  # every unit placed exactly once
    assert_invariants(reference.words, timings)
    assert all(timing.aligned for timing in timings)
    errors = boundary_errors(reference, timings)
    assert np.median(errors) < 0.025 and np.mean(errors <= 0.05) >= 0.85, errors
