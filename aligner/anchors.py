"""Aligning a talk chunk by chunk, each chunk of tokens on its own span of the audio (:mod:`corpus.anchors`).

    from aligner.anchors import align_anchored
    timings = align_anchored("talk.wav", words, chunks, backend="pocketsphinx")

Any backend: each chunk's span of the audio (read once, 16 kHz mono) is written to a temporary WAV and aligned
with :func:`aligner.align`, its times shifted back by the span's start. A chunk whose span holds no usable
audio (silent, too short) leaves its words unplaced rather than failing the talk. A word the backend did not
place keeps the estimate it gave within its chunk; words left without any time are filled in over the whole talk
(``config.unaligned``), and ``config.min_placed_share`` applies to the
whole talk, as for :func:`aligner.align`. One chunk spanning the whole file is plain :func:`aligner.align`.
"""

from __future__ import annotations

import dataclasses
import os
import tempfile
from collections.abc import Sequence
from pathlib import Path

from aligner.audio import SAMPLE_RATE, load_audio
from aligner.registry import DEFAULT_BACKEND, align
from aligner.timing import NAN, check_timings, interpolate
from aligner.types import AlignConfig, AudioError, PoorAlignmentError, WordTiming, placement_problem, too_few_placed
from corpus.anchors import AnchorChunk, check_chunks

__all__ = ["align_anchored"]


def align_anchored(audio_path: str | os.PathLike, words: Sequence[str], chunks: Sequence[AnchorChunk], *,
                   config: AlignConfig | None = None, backend: str = DEFAULT_BACKEND) -> list[WordTiming]:
    """One :class:`WordTiming` per word, in order, aligning each chunk on its span (see the module docstring).

    Raises :class:`aligner.AudioError` for unusable audio, :class:`corpus.anchors.AnchorFormatError` when the
    chunks do not tile the words, and :class:`aligner.PoorAlignmentError` as :func:`aligner.align` does.
    """
    config = config or AlignConfig()
    words = [str(word) for word in words]
    check_chunks(chunks, len(words), where=f"anchors of {audio_path}")
    samples = load_audio(audio_path)
    duration = len(samples) / SAMPLE_RATE
    if len(chunks) == 1 and chunks[0].start <= 0.0 and chunks[0].end >= duration - 1e-3:
        return align(audio_path, words, config=config, backend=backend)
    import soundfile

    inner = dataclasses.replace(config, min_placed_share=None)
    timings: list[WordTiming] = []
    with tempfile.TemporaryDirectory(prefix="anchored-") as folder:
        piece = Path(folder) / "chunk.wav"
        for chunk in chunks:
            first = min(len(samples), max(0, int(round(chunk.start * SAMPLE_RATE))))
            last = min(len(samples), max(first, int(round(chunk.end * SAMPLE_RATE))))
            chunk_words = words[chunk.first : chunk.stop]
            soundfile.write(str(piece), samples[first:last], SAMPLE_RATE, subtype="FLOAT")
            try:
                found = align(piece, chunk_words, config=inner, backend=backend)
            except AudioError:  # an empty or silent span: its words stay unplaced
                timings += [WordTiming(word, NAN, NAN, False) for word in chunk_words]
                continue
            offset = first / SAMPLE_RATE
            timings += [WordTiming(t.word, t.start + offset, t.end + offset, t.aligned) for t in found]
    timings = interpolate(timings, duration, mode=config.unaligned)
    check_timings(words, timings)
    placed = sum(timing.aligned for timing in timings)
    if too_few_placed(placed, len(words), config.min_placed_share):
        raise PoorAlignmentError(placement_problem(audio_path, placed, len(words))
                                 + f"; below min_placed_share {config.min_placed_share}", placed=placed,
                                 total=len(words))
    return timings
