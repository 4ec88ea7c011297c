"""aligner.anchors.align_anchored: each chunk of tokens aligned on its own span of the audio (tiny flite speech)."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("pocketsphinx", reason="pocketsphinx is not installed")
soundfile = pytest.importorskip("soundfile")

from aligner import AlignConfig, PoorAlignmentError, align  # noqa: E402
from aligner.anchors import align_anchored  # noqa: E402
from audio.reference_speech import flite_available, synthesize  # noqa: E402
from corpus.anchors import AnchorChunk, AnchorFormatError  # noqa: E402
from tests.fixture_tedlium import boundary_errors_ms  # noqa: E402

pytestmark = pytest.mark.skipif(not flite_available(), reason="flite is not installed (apt-get install flite)")

TEXT = ("The river was cold that morning. My grandmother said we shouldn't go in. "
        "I didn't listen, of course. She laughed at me for an hour.")


@pytest.fixture(scope="module")
def speech(tmp_path_factory):
    path = tmp_path_factory.mktemp("anchored") / "talk.wav"
    return path, synthesize(TEXT, path, voice="kal16")


def sentence_chunks(reference) -> list[AnchorChunk]:  # noqa: ANN001
    """Chunks at the sentence ends, cut in the middle of each pause."""
    ends = [i for i, word in enumerate(reference.words) if word in ("morning", "in", "course")]
    bounds = [(0, 0.0)]
    for index in ends:
        cut = (reference.timings[index].end + reference.timings[index + 1].start) / 2
        bounds.append((index + 1, round(cut, 3)))
    bounds.append((len(reference.words), reference.duration))
    return [AnchorChunk(a, b - a, t, u) for (a, t), (b, u) in zip(bounds, bounds[1:])]


def test_chunks_are_aligned_on_their_spans_as_well_as_the_whole(speech):
    path, reference = speech
    chunks = sentence_chunks(reference)
    assert len(chunks) == 4
    timings = align_anchored(path, reference.words, chunks)
    assert [t.word for t in timings] == reference.words and all(t.aligned for t in timings)
    for chunk in chunks:
        for timing in timings[chunk.first : chunk.stop]:
            assert chunk.start - 1e-6 <= timing.start <= timing.end <= chunk.end + 1e-6
    errors = boundary_errors_ms(reference, timings)
    whole = boundary_errors_ms(reference, align(path, reference.words))
    assert np.median(errors) < 25 and np.mean(errors <= 50) >= 0.9
    assert np.median(errors) <= np.median(whole) + 10
    # one chunk over the whole file is plain alignment
    assert align_anchored(path, reference.words, [AnchorChunk(0, len(reference.words), 0.0, reference.duration)]) \
        == align(path, reference.words)


def test_a_chunk_over_silence_leaves_its_words_unplaced_not_the_talk(speech, tmp_path):
    path, reference = speech
    samples, rate = soundfile.read(str(path), dtype="float32")
    padded = tmp_path / "padded.wav"
    soundfile.write(str(padded), np.concatenate([samples, np.zeros(rate * 2, np.float32)]), rate)
    chunks = sentence_chunks(reference)
    last = chunks[-1]
    # the last sentence is given the silence after the speech instead of its own span
    moved = chunks[:-1] + [AnchorChunk(last.first, last.count, reference.duration + 0.2, reference.duration + 1.9)]
    timings = align_anchored(padded, reference.words, moved)
    assert all(t.aligned for t in timings[: last.first])
    assert not any(t.aligned for t in timings[last.first :])
    assert all(t.has_time for t in timings)  # estimates, inside the talk
    with pytest.raises(PoorAlignmentError, match="padded.wav: only"):
        align_anchored(padded, reference.words, moved, config=AlignConfig(min_placed_share=0.9))


def test_chunks_that_do_not_tile_the_words_are_refused(speech):
    path, reference = speech
    with pytest.raises(AnchorFormatError, match="cover 3 tokens"):
        align_anchored(path, reference.words, [AnchorChunk(0, 3, 0.0, 1.0)])
