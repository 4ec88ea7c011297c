"""Result type, configuration and errors shared by every alignment backend."""

from __future__ import annotations

from dataclasses import dataclass, field

from corpus.timings import WordTiming

__all__ = ["WordTiming", "AlignConfig", "AlignmentError", "AudioError", "BackendUnavailable", "PoorAlignmentError",
           "MOSTLY_UNPLACED", "mostly_unplaced", "placement_problem", "too_few_placed"]


@dataclass
class AlignConfig:
    """Settings of the alignment backends (each backend reads its own fields, the rest are ignored).

    Common
        unaligned: what the times of a word the aligner never placed become: ``"interpolate"`` (default,
            spread over the gap between the neighbouring placed words, the audio start/end bounding a
            leading or trailing run, in proportion to each word's letters; NaN when no word of the file was
            placed) or ``"nan"``.
        min_placed_share: :func:`aligner.align` raises :class:`PoorAlignmentError` when no more than this
            share of the words is placed (``aligned``; :func:`too_few_placed`: at 0.5, 11 of 22 fails); None
            (default) or 0 accepts any share. Most words unplaced means
            the audio is not what the transcript says: another recording, a header stating the wrong sample
            rate (the speech then plays at the wrong speed), or a damaged file. On the pipeline's synthetic
            talks about 99 % of words are placed (ASR transcripts on the reference audio about 93 %).

    pocketsphinx
        hmm, dictionary: acoustic model directory and pronunciation dictionary; None = the en-us model and
            CMUdict shipped inside the ``pocketsphinx`` wheel.
        beam, wbeam, pbeam: search beams of the first try. Wider than pocketsphinx's defaults (1e-48,
            7e-29, 1e-48): in white noise at 10 dB those pruned the right path of whole windows (the open end
            of a window hides that), while on clean speech the wider ones cost about 5 % more time.
        wide_beam: the beam (all three) of the retry when the first try finds no path.
        skip_probability: probability of skipping a word in the last-resort grammar (tried when even the wide
            beams find no path through every word; skipped words come out unaligned).
        max_frame_score, score_slope_per_db, clean_snr_db: the confidence test. A placed word whose mean
            acoustic cost per 10 ms frame (-ln of pocketsphinx's best-normalised acoustic likelihood, x 1e4)
            exceeds ``max_frame_score + score_slope_per_db * max(0, clean_snr_db - SNR)`` is flagged
            ``aligned=False`` (keeping its forced position); SNR is :func:`aligner.audio.estimate_snr` of the
            file, since noise raises every word's cost. None disables the test. Calibration (flite speech,
            words of the right transcript: cost median/99th percentile 10/36 clean, 18/47 with white noise
            at 20 dB, 42/85 at 10 dB; LibriVox read speech 10/28; words of a wrong transcript forced onto
            clean speech 51/117): the defaults flag none of the clean words and most wrong ones.
        max_single_pass_s: audio up to this long (from the current anchor on) is aligned in one pass.
        window_s: longer audio is aligned window by window, each about this long, cut at the quietest point
            near its end; the last ``tail_words`` placed words of a window are re-aligned by the next one.
        tail_words: see window_s.
        flite: the flite command used for pronunciations of words missing from the dictionary
            (None = no grapheme-to-phoneme step: such words come out unaligned).
        loglevel: pocketsphinx's log level.
        decoder_options: further pocketsphinx decoder parameters (e.g. ``{"silprob": 0.1}``).

    mfa (Montreal Forced Aligner, the ``mfa`` command of a conda install)
        mfa_command, mfa_dictionary, mfa_acoustic_model: command and the dictionary/acoustic-model names or
            paths given to ``mfa align``; mfa_args: extra arguments; mfa_timeout_s: time limit of the run.
    """

    unaligned: str = "interpolate"
    min_placed_share: float | None = None
    # pocketsphinx
    hmm: str | None = None
    dictionary: str | None = None
    beam: float = 1e-120
    wbeam: float = 1e-120
    pbeam: float = 1e-120
    wide_beam: float = 1e-200
    skip_probability: float = 1e-10
    max_frame_score: float | None = 40.0
    score_slope_per_db: float = 3.0
    clean_snr_db: float = 30.0
    max_single_pass_s: float = 60.0
    window_s: float = 30.0
    tail_words: int = 2
    flite: str | None = "flite"
    loglevel: str = "FATAL"
    decoder_options: dict = field(default_factory=dict)
    # mfa
    mfa_command: str = "mfa"
    mfa_dictionary: str = "english_us_arpa"
    mfa_acoustic_model: str = "english_us_arpa"
    mfa_args: tuple[str, ...] = field(default=("--clean", "--single_speaker"))
    mfa_timeout_s: float = 3600.0

    def __post_init__(self) -> None:
        if self.unaligned not in ("interpolate", "nan"):
            raise ValueError(f"unaligned must be 'interpolate' or 'nan', not {self.unaligned!r}")
        if self.window_s <= 0 or self.max_single_pass_s <= 0:
            raise ValueError("window_s and max_single_pass_s must be positive")
        if self.tail_words < 0:
            raise ValueError("tail_words must be >= 0")
        if self.min_placed_share is not None and not 0.0 <= self.min_placed_share <= 1.0:
            raise ValueError(f"min_placed_share must be between 0 and 1 (or None), not {self.min_placed_share!r}")


class AlignmentError(Exception):
    """Base class of the errors the aligner raises for bad input or an unusable backend."""


class AudioError(AlignmentError, ValueError):
    """The audio file is missing, empty, unreadable, corrupt or silent (the message names the file)."""


class BackendUnavailable(AlignmentError, RuntimeError):
    """The backend's program or package is not installed."""


class PoorAlignmentError(AlignmentError, ValueError):
    """Fewer words placed than :attr:`AlignConfig.min_placed_share` asks (the message names the file)."""

    def __init__(self, message: str, *, placed: int, total: int):
        super().__init__(message)
        self.placed, self.total = placed, total


#: A file where at most this share of the words was placed (half or more unplaced) is reported as mostly
#: unplaced, whatever the threshold.
MOSTLY_UNPLACED = 0.5


def too_few_placed(placed: int, total: int, min_share: float | None) -> bool:
    """Whether ``placed`` of ``total`` words fails the threshold ``min_share`` (the one rule of the project).

    An alignment passes when *more* than ``min_share`` of its words are placed, or when every word is: at
    0.5, 11 placed of 22 fails (half unplaced), 12 of 22 passes; at 1.0 only a complete alignment passes.
    ``min_share`` 0 or None accepts any alignment, and so does an empty transcript.
    """
    if not min_share or total <= 0 or placed >= total:
        return False
    return placed <= min_share * total


def mostly_unplaced(placed: int, total: int) -> bool:
    """Half or more of the words unplaced (:data:`MOSTLY_UNPLACED`): the file deserves a warning."""
    return too_few_placed(placed, total, MOSTLY_UNPLACED)


def placement_problem(audio_path: object, placed: int, total: int) -> str:
    """Why ``placed`` of ``total`` words is too few, naming the file and the likely causes."""
    share = placed / total if total else 0.0
    return (f"{audio_path}: only {placed} of {total} words placed ({share:.0%}): does the transcript match the "
            f"audio, and does the file's header state its real sample rate? (a damaged file does this too)")
