"""Synthetic speech for the benchmark's talks, with the engine's own word timings as ground truth.

The IWSLT2011 benchmark has text only. To study speech features under control, each talk is read aloud by a
speech synthesiser: 16 kHz mono WAV per talk plus the time span of every benchmark token, taken from the
engine itself (not from an aligner, so the aligner can be scored against it).

The speech engines and their timings are :mod:`audio.engines`; what the engine is given for each token and
how its phones are dealt back to the tokens (clitics, silent tokens, marks) is :mod:`audio.spoken`; real
recordings instead of synthesis: :mod:`audio.real_audio`.

Long talks: chunks
------------------
A talk is synthesised in chunks of at most ``max_chunk_tokens`` spoken tokens, concatenated in the
engine's own sample rate and resampled once at the end, so that each chunk's timings are shifted by the
exact number of samples before it (offsets are exact to the sample; the final resampling moves nothing by
more than one output sample, 62.5 us).

* ``punctuated=True``: chunks are whole sentences (a chunk ends at a PERIOD/QUESTION; a sentence longer
  than the limit is cut at its last COMMA within the limit, else at the limit). The leading silence of every
  chunk but the first is cut at its first phone; the silence after a chunk is the engine's own trailing
  pause, padded to ``join_pause_s / rate`` (default 0.25 s; espeak ends an utterance with almost none).
* ``punctuated=False``: chunk lengths are drawn from ``[max_chunk_tokens // 2, max_chunk_tokens]`` with
  ``random.Random(seed)`` *regardless of the labels*, and every join is cut phone to phone (leading and
  trailing silence removed), so a join carries no pause and its position says nothing about punctuation.

Batch synthesis and resuming
----------------------------
:func:`synthesize_talks` draws per talk, from ``random.Random(f"{seed}/{talk_id}")`` (independent of the
order and number of talks): a voice from ``voices`` (``"engine:voice"`` strings), a rate from
``rate_range`` and a pitch from ``pitch_range`` (uniform, rounded to 3 decimals). It writes
``<stem>.wav``, ``<stem>.timings.tsv`` and, last, ``<stem>.json`` (settings, fingerprint, sample count) per
talk, where ``stem = talk_stem(talk_id)``. A talk is skipped when its JSON has the same settings fingerprint
(engine, voice, rate, pitch, mode, chunking, seed, engine version, this module's ``SYNTHESIS_VERSION`` and
a hash of the talk's words and labels) and its WAV and TSV are complete; otherwise it is redone. A talk that
fails is recorded in the report with its error and the others carry on.

Timings TSV: header ``index word start end aligned source``; one row per benchmark token of the talk, times
in seconds (6 decimals), ``aligned`` 1/0, ``source`` in ``engine`` (the engine's own token/word span),
``clitic_rule``, ``join_rule`` (phone-exact spans attributed by the rules of :mod:`audio.spoken`), ``silent``
(not spoken) or ``unaligned`` (spoken, but no phone of its own). Read it with
:func:`corpus.timings.read_engine_timings`.

Speed (one core, ``nice -n 19`` beside a training run, talk 1178 of test2011, 617 tokens, punctuated):
flite ``slt`` 181 s of audio in 2.7 s (68x real time), ``kal16`` ~1,400x, espeak-ng ``en-us`` ~800x.
On that talk flite gives every token a span (585 engine, 32 clitic rule); espeak-ng 513 engine, 56 clitic
rule, 46 join rule, 2 unaligned (``'m``).
"""

from __future__ import annotations

import hashlib
import json
import random
import re
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from audio.engines import ENGINE_CLASSES, get_engine
from audio.spoken import MARKS, make_chunks, make_units, split_clitics, written_form
from corpus.io import atomic_path, atomic_write_text
from corpus.timings import WordTiming, write_engine_timings

__all__ = [
    "OUTPUT_SAMPLE_RATE",
    "SYNTHESIS_VERSION",
    "SynthesisResult",
    "synthesize_talk",
    "synthesize_talks",
    "talk_stem",
    "timings_path_for",
]

#: Sample rate of every WAV written here.
OUTPUT_SAMPLE_RATE = 16000
#: Bumped whenever the audio or timings this module writes would change; part of the settings fingerprint.
SYNTHESIS_VERSION = 1


@dataclass
class SynthesisResult:
    wav: Path
    duration: float
    word_timings: list[WordTiming]
    timings_path: Path
    sample_rate: int = OUTPUT_SAMPLE_RATE
    chunks: int = 0
    settings: dict[str, Any] = field(default_factory=dict)


# --- one talk -------------------------------------------------------------------------------------------


def talk_stem(talk_id: str) -> str:
    """File stem for a talk: the id when it is ``[A-Za-z0-9._-]+``, else a cleaned id plus a short hash."""
    if re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._-]*", talk_id) and len(talk_id) <= 120:
        return talk_id
    cleaned = re.sub(r"[^A-Za-z0-9._-]+", "_", talk_id).strip("._-")[:100] or "talk"
    return f"{cleaned}-{hashlib.sha1(talk_id.encode('utf-8')).hexdigest()[:8]}"


def timings_path_for(wav: str | Path) -> Path:
    """``<stem>.timings.tsv`` beside ``<stem>.wav``."""
    wav = Path(wav)
    stem = wav.name[: -len(".wav")] if wav.name.endswith(".wav") else wav.name
    return wav.with_name(f"{stem}.timings.tsv")


def synthesize_talk(
    words: Sequence[str],
    labels: Sequence[str],
    out_wav: str | Path,
    *,
    engine: str,
    voice: str,
    rate: float = 1.0,
    pitch: float = 1.0,
    punctuated: bool,
    seed: int = 0,
    max_chunk_tokens: int = 80,
    join_pause_s: float = 0.25,
) -> SynthesisResult:
    """Speak one talk into ``out_wav`` (16 kHz mono PCM-16) and write ``<stem>.timings.tsv`` beside it.

    ``rate`` and ``pitch`` are factors (1.0 = the voice's default; see :mod:`audio.engines` per engine).
    Returns the WAV path, its duration in seconds and one :class:`WordTiming` per benchmark token.
    """
    import soundfile

    if len(words) != len(labels):
        raise ValueError(f"{len(words)} words but {len(labels)} labels")
    if not words:
        raise ValueError("a talk needs at least one token")
    if not (0.25 <= rate <= 4.0 and 0.25 <= pitch <= 4.0):
        raise ValueError(f"rate and pitch must be factors in [0.25, 4], got rate={rate}, pitch={pitch}")
    unknown = sorted(set(labels) - set(MARKS))
    if unknown:
        raise ValueError(f"unknown labels {unknown}")
    out_wav = Path(out_wav)
    speaker = get_engine(engine)
    units, _ = make_units(words, labels)
    if not units:
        raise ValueError("nothing to say: every token is silent")

    pieces: list[np.ndarray] = []
    spans: list[tuple[int, int, str] | None] = [None] * len(words)
    offset = 0
    sample_rate = None
    chunks = make_chunks(units, punctuated=punctuated, max_tokens=max_chunk_tokens, seed=seed)
    for number, (first, end) in enumerate(chunks):
        chunk_units = units[first:end]
        texts = [written_form(units, k, punctuated) for k in range(first, end)]
        output = speaker.synthesize(texts, voice=voice, rate=rate, pitch=pitch)
        if sample_rate is None:
            sample_rate = output.sample_rate
        elif output.sample_rate != sample_rate:
            raise RuntimeError(f"engine changed sample rate mid-talk ({sample_rate} -> {output.sample_rate})")
        audio = output.audio
        said = [s for words_ in output.tokens for _, segs in words_ for s in segs]
        cut_start, cut_end = 0, len(audio)
        if said:
            if number > 0:
                cut_start = min(s.start for s in said)
            if not punctuated and number < len(chunks) - 1:
                cut_end = max(s.end for s in said)
        piece = audio[cut_start:cut_end]
        if punctuated and number < len(chunks) - 1 and said:
            trailing = cut_end - max(s.end for s in said)
            wanted = round(join_pause_s / rate * sample_rate)
            if trailing < wanted:
                piece = np.concatenate([piece, np.zeros(wanted - trailing, np.float32)])
        for unit, engine_words in zip(chunk_units, output.tokens):
            for token, span in zip(unit.tokens, split_clitics(unit, words, engine_words)):
                if span is not None:
                    spans[token] = (span[0] - cut_start + offset, span[1] - cut_start + offset, span[2])
        pieces.append(piece)
        offset += len(piece)

    audio = np.concatenate(pieces)
    assert sample_rate is not None
    if sample_rate != OUTPUT_SAMPLE_RATE:
        import librosa

        audio = librosa.resample(audio, orig_sr=sample_rate, target_sr=OUTPUT_SAMPLE_RATE, res_type="soxr_hq")
    audio = np.clip(audio, -1.0, 1.0).astype(np.float32)
    duration = len(audio) / OUTPUT_SAMPLE_RATE

    timings: list[WordTiming] = []
    previous_end = 0.0
    for index, word in enumerate(words):
        span = spans[index]
        if span is None or span[2] == "unaligned":
            at = previous_end if span is None else min(span[0] / sample_rate, duration)
            timings.append(WordTiming(word, at, at, False, "silent" if span is None else "unaligned"))
            continue
        start = min(span[0] / sample_rate, duration)
        end = min(max(span[1] / sample_rate, start), duration)
        timings.append(WordTiming(word, start, end, True, span[2]))
        previous_end = end

    with atomic_path(out_wav, suffix=".wav") as temporary:
        soundfile.write(temporary, audio, OUTPUT_SAMPLE_RATE, subtype="PCM_16", format="WAV")
    timings_path = write_engine_timings(timings_path_for(out_wav), timings)
    settings = {
        "engine": engine,
        "voice": voice,
        "rate": rate,
        "pitch": pitch,
        "punctuated": punctuated,
        "seed": seed,
        "max_chunk_tokens": max_chunk_tokens,
        "join_pause_s": join_pause_s,
        "engine_version": speaker.version,
        "engine_sample_rate": sample_rate,
    }
    return SynthesisResult(out_wav, duration, timings, timings_path, OUTPUT_SAMPLE_RATE, len(chunks), settings)


# --- many talks -----------------------------------------------------------------------------------------


def _draw_settings(
    talk_id: str, voices: Sequence[str], rate_range: tuple[float, float], pitch_range: tuple[float, float], seed: int
) -> dict[str, Any]:
    rng = random.Random(f"{seed}/{talk_id}")
    spec = voices[rng.randrange(len(voices))]
    engine, _, voice = spec.partition(":")
    rate = round(rng.uniform(*rate_range), 3)
    pitch = round(rng.uniform(*pitch_range), 3)
    return {"engine": engine, "voice": voice, "rate": rate, "pitch": pitch, "chunk_seed": rng.randrange(2**31)}


def _fingerprint(talk: Any, settings: Mapping[str, Any]) -> str:
    content = hashlib.sha256()
    for word, label in zip(talk.words, talk.labels):
        content.update(f"{word}\t{label}\n".encode("utf-8"))
    blob = json.dumps({**settings, "version": SYNTHESIS_VERSION, "content": content.hexdigest()}, sort_keys=True)
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()


def _complete(out_dir: Path, stem: str, fingerprint: str, tokens: int) -> bool:
    """Whether a talk's outputs are all there, whole, and made with these settings."""
    import soundfile

    meta_path, wav, tsv = out_dir / f"{stem}.json", out_dir / f"{stem}.wav", out_dir / f"{stem}.timings.tsv"
    if not (meta_path.is_file() and wav.is_file() and tsv.is_file()):
        return False
    try:
        meta = json.loads(meta_path.read_text(encoding="utf-8"))
        if meta.get("fingerprint") != fingerprint:
            return False
        info = soundfile.info(str(wav))
        if info.frames != meta.get("frames") or info.samplerate != OUTPUT_SAMPLE_RATE or info.channels != 1:
            return False
        with tsv.open(encoding="utf-8") as handle:
            rows = sum(1 for line in handle if line.strip()) - 1
        return rows == tokens
    except (OSError, ValueError, RuntimeError):
        return False


def synthesize_talks(
    talks: Sequence[Any],
    out_dir: str | Path,
    *,
    voices: Sequence[str],
    rate_range: tuple[float, float] = (0.9, 1.1),
    pitch_range: tuple[float, float] = (0.9, 1.1),
    punctuated: bool,
    seed: int,
    max_chunk_tokens: int = 80,
    join_pause_s: float = 0.25,
    progress: bool = False,
) -> dict[str, Any]:
    """Synthesise every talk (objects with ``talk_id``, ``words``, ``labels``) into ``out_dir``; resumable.

    Returns a JSON-serialisable report: per talk its settings and status (``done``/``skipped``/``failed`` with
    the error), audio seconds made, compute seconds; ``out_dir/synthesis_report.json`` holds it without what
    only this run can say (times, audio made now; ``done`` and ``skipped`` both read ``ok``), the same bytes
    whichever run made the files."""
    if not voices:
        raise ValueError("voices is empty")
    for spec in voices:
        engine, _, voice = spec.partition(":")
        if engine not in ENGINE_CLASSES or not voice:
            raise ValueError(f"voice {spec!r} must be 'engine:voice' with engine in {sorted(ENGINE_CLASSES)}")
    for low_high, name in ((rate_range, "rate_range"), (pitch_range, "pitch_range")):
        if len(low_high) != 2 or not 0 < low_high[0] <= low_high[1]:
            raise ValueError(f"{name} must be (low, high) with 0 < low <= high, got {low_high}")
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    rows: list[dict[str, Any]] = []
    made_seconds = compute_seconds = 0.0
    stems: dict[str, str] = {}
    iterator: Any = talks
    if progress:
        from tqdm import tqdm

        iterator = tqdm(talks, desc="synthesis", unit="talk")
    for talk in iterator:
        stem = talk_stem(talk.talk_id)
        if stem in stems:
            raise ValueError(f"talks {stems[stem]!r} and {talk.talk_id!r} map to the same file stem {stem!r}")
        stems[stem] = talk.talk_id
        row: dict[str, Any] = {"talk": talk.talk_id, "stem": stem, "tokens": len(talk.words)}
        try:
            drawn = _draw_settings(talk.talk_id, voices, rate_range, pitch_range, seed)
            settings = {
                "engine": drawn["engine"],
                "voice": drawn["voice"],
                "rate": drawn["rate"],
                "pitch": drawn["pitch"],
                "punctuated": punctuated,
                "seed": drawn["chunk_seed"],
                "max_chunk_tokens": max_chunk_tokens,
                "join_pause_s": join_pause_s,
            }
            row.update(settings)
            fingerprint = _fingerprint(talk, {**settings, "engine_version": get_engine(settings["engine"]).version})
            row["fingerprint"] = fingerprint
            if _complete(out_dir, stem, fingerprint, len(talk.words)):
                row["status"] = "skipped"
                meta = json.loads((out_dir / f"{stem}.json").read_text(encoding="utf-8"))
                row["duration"] = meta.get("duration")
                rows.append(row)
                continue
            (out_dir / f"{stem}.json").unlink(missing_ok=True)  # the completion marker goes first
            began = time.perf_counter()
            result = synthesize_talk(talk.words, talk.labels, out_dir / f"{stem}.wav", **settings)
            elapsed = time.perf_counter() - began
            frames = round(result.duration * OUTPUT_SAMPLE_RATE)
            meta = {
                "talk": talk.talk_id,
                "fingerprint": fingerprint,
                "frames": frames,
                "duration": result.duration,
                "tokens": len(talk.words),
                "aligned_tokens": sum(t.aligned for t in result.word_timings),
                "chunks": result.chunks,
                "settings": result.settings,
            }
            atomic_write_text(out_dir / f"{stem}.json", json.dumps(meta, indent=1, ensure_ascii=False))
            row.update(status="done", duration=result.duration, compute_seconds=round(elapsed, 3))
            made_seconds += result.duration
            compute_seconds += elapsed
        except Exception as error:  # noqa: BLE001 -- recorded per talk, the others carry on
            row.update(status="failed", error=f"{type(error).__name__}: {error}")
        rows.append(row)
    report = {
        "out_dir": str(out_dir),
        "punctuated": punctuated,
        "seed": seed,
        "voices": list(voices),
        "rate_range": list(rate_range),
        "pitch_range": list(pitch_range),
        "talks": len(rows),
        "done": sum(r["status"] == "done" for r in rows),
        "skipped": sum(r["status"] == "skipped" for r in rows),
        "failed": [{"talk": r["talk"], "error": r["error"]} for r in rows if r["status"] == "failed"],
        "audio_seconds_made": round(made_seconds, 3),
        "compute_seconds": round(compute_seconds, 3),
        "realtime_factor": round(made_seconds / compute_seconds, 2) if compute_seconds else None,
        "per_talk": rows,
    }
    # The file lies in a DVC output: the same bytes whichever run made it, so what only this run can say (compute
    # times, audio made now, which talks were made and which were already there) stays in the returned report.
    run_only = ("compute_seconds", "realtime_factor", "done", "skipped", "audio_seconds_made")
    timeless = {key: value for key, value in report.items() if key not in run_only}
    timeless["ok"] = report["done"] + report["skipped"]
    timeless["per_talk"] = [
        {key: ("ok" if key == "status" and value in ("done", "skipped") else value) for key, value in row.items()
         if key != "compute_seconds"} for row in rows]
    atomic_write_text(out_dir / "synthesis_report.json", json.dumps(timeless, indent=1, ensure_ascii=False))
    return report
