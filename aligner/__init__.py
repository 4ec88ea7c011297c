"""Forced alignment of transcripts to speech: word start/end times for the audio half of the pipeline.

    from aligner import align
    timings = align("talk.wav", ["so", "i", "do", "n't", "know"])   # -> list[WordTiming]

``align(audio_path, words, *, config, backend)`` returns one :class:`WordTiming` ``(word, start, end,
aligned)`` per input word, in order, never dropping or duplicating one. Backends (:mod:`aligner.registry`):
``pocketsphinx`` (default; pip-only, :mod:`aligner.pocketsphinx_backend`) and ``mfa`` (the Montreal Forced
Aligner's ``mfa`` command where a conda install put it on PATH, :mod:`aligner.mfa_backend`).
Pronunciations and contractions: :mod:`aligner.pronounce`. Outputs: :mod:`aligner.output`. Scoring against
reference word times: :mod:`aligner.evaluation`. Filling in and inheriting times (:func:`interpolate`, and
:func:`inherit_timings` for ASR tokens aligned beside a reference transcript): :mod:`aligner.timing`.
Synthetic test speech with reference timings lives a layer up, in :mod:`audio.reference_speech`. Command line:
``python -m aligner AUDIO TRANSCRIPT -o WORDS.tsv`` (:mod:`aligner.cli`), and a whole folder of talks, resumable
and in parallel (local processes or a Dask cluster): ``python -m aligner batch AUDIO_DIR TRANSCRIPT_DIR -o OUT_DIR``
(:mod:`aligner.batch`, over :mod:`executor`, the executor the align and features stages and ``punctuate`` share).
A talk with known anchors (chunks of tokens with their spans of audio, :mod:`corpus.anchors`) is aligned chunk by
chunk by :func:`aligner.anchors.align_anchored`. Accuracy and speed: ``benchmarks/alignment.py``; throughput and
scaling: ``benchmarks/alignment_throughput.py``.
"""

from aligner.output import read_alignment_table, write_alignment_table, write_textgrid, write_tsv
from aligner.registry import DEFAULT_BACKEND, align, backend_names, get_backend, register_backend
from aligner.timing import asr_mapping, inherit_timings, interpolate
from aligner.types import (
    MOSTLY_UNPLACED,
    AlignConfig,
    AlignmentError,
    AudioError,
    BackendUnavailable,
    PoorAlignmentError,
    WordTiming,
    placement_problem,
)

__all__ = [
    "AlignConfig",
    "AlignmentError",
    "AudioError",
    "BackendUnavailable",
    "DEFAULT_BACKEND",
    "MOSTLY_UNPLACED",
    "PoorAlignmentError",
    "WordTiming",
    "align",
    "asr_mapping",
    "backend_names",
    "get_backend",
    "inherit_timings",
    "interpolate",
    "placement_problem",
    "read_alignment_table",
    "register_backend",
    "write_alignment_table",
    "write_textgrid",
    "write_tsv",
]
