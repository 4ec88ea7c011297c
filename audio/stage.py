"""The audio half of the pipeline as three library functions: talk audio, forced alignment, token features.

Each takes explicit arguments (the stage wrappers ``pipeline/synthesize.py``, ``pipeline/align.py`` and
``pipeline/features.py`` read them from ``params.yaml``), reads the previous one's output folder, is resumable
talk by talk (finished talks are never redone or deleted unless their inputs changed) and records a talk that
fails -- with its error -- without stopping the others.

:func:`make_talk_audio` -> ``<audio_dir>``
    Cuts the prepared splits into talks (:mod:`audio.talks`): ``ref`` (test2011) and ``asr`` (test2011asr)
    into the 8 talks of their XML sources, ``dev`` into pseudo-talks, ``train`` by ``train_talks.tsv``. Per
    split, whole talks are taken in order while the split's total stays within ``split_tokens[split]``
    (``None``: every talk); the rest are *excluded* (listed, with the reason). Each taken talk is read aloud
    by :func:`audio.synthesis.synthesize_talks` (voice, rate and pitch drawn per talk; the engine's word
    timings are kept as ground truth) into ``<audio_dir>/<split>/<stem>.wav`` (+ ``.timings.tsv``, ``.json``),
    or, with ``source="real"``, ``<real_audio_dir>/<stem>.wav`` is validated and copied there (no synthesis,
    no ground truth). Ref and ASR are two transcripts of the same talks, so the audio is made once, from the
    reference text; the ``asr`` rows of the talks table point at the ``ref`` talk's WAV. Writes
    ``<audio_dir>/talks.tsv`` (:data:`TALK_COLUMNS`) and ``<audio_dir>/audio_report.json``.

:func:`align_talks` -> ``<alignments_dir>/<split>/<stem>.parquet`` (+ ``.TextGrid``, ``.json``)
    Aligns every talk with audio: its prepared tokens on its WAV with :func:`aligner.align`. A talk is skipped
    when its ``.json`` holds the same fingerprint (SHA-256 of the WAV's bytes, the token list, the backend and
    its settings, :data:`STAGE_VERSION`; for ASR also the reference alignment it inherits from). ASR: the ASR
    tokens are aligned on the talk's (reference) audio themselves; a token the aligner could not place
    confidently inherits the time of the reference token it corresponds to in a word-level alignment of the
    two transcripts (:func:`inherit_timings`), and the Parquet's ``source`` column says ``own``,
    ``inherited`` or ``none`` (no time: ``aligned`` false). The report scores the aligned material against
    the engine's own word timings (:mod:`aligner.evaluation`): boundary error median/mean/within 20 and 50 ms,
    at pauses and at word-to-word junctions.

:func:`token_features` -> ``<features_dir>/<split>/``
    Per split, arrays aligned with the *whole* token sequence of ``<prepared_dir>/<split>.tsv``:
    ``features.npy`` (N, F) float32, ``missing.npy`` (N, F) bool, ``has_audio.npy`` (N,) bool,
    ``feature_names.json``, and the MFCC store ``mfcc.npy`` (T, 13) float32 + ``mfcc_offsets.npy`` (N + 1,)
    int64 (token i owns rows ``offsets[i]:offsets[i+1]``; empty for a token without audio or time). Features
    are :func:`audio.features.talk_features` of each aligned talk, on the aligner's timings (not the engine's:
    real recordings have only the aligner's). A token without audio or without a confident time is flagged in
    ``missing`` and holds the neutral value of :data:`audio.features.NEUTRAL_VALUES` (``duration`` 0 outside
    talks) -- never NaN. Per-talk results are cached under ``<split>/talks/`` (fingerprint: the alignment's
    fingerprint, the Parquet's bytes and the feature settings).
"""

from __future__ import annotations

import dataclasses
import difflib
import hashlib
import json
import math
import os
import shutil
import time
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

__all__ = [
    "ASR_SOURCES",
    "AUDIO_SPLITS",
    "STAGE_VERSION",
    "TALK_COLUMNS",
    "TALKS_TABLE",
    "align_talks",
    "audio_report_markdown",
    "inherit_timings",
    "make_talk_audio",
    "read_talks_table",
    "split_talks",
    "token_features",
    "write_talks_table",
]

#: Splits that can have audio; ``asr`` shares the audio of ``ref``.
AUDIO_SPLITS: tuple[str, ...] = ("ref", "asr", "dev", "train")
#: Splits whose audio is made (``split_tokens`` keys).
MADE_SPLITS: tuple[str, ...] = ("ref", "dev", "train")
TALKS_TABLE = "talks.tsv"
TALK_COLUMNS: tuple[str, ...] = (
    "talk", "split", "first_token", "tokens", "wav", "duration_s", "voice", "rate", "pitch", "status", "action",
    "error",
)
#: Where an ASR token's time comes from.
ASR_SOURCES: tuple[str, ...] = ("own", "inherited", "none")
#: Bumped whenever alignment or feature outputs would change for the same inputs (part of the fingerprints).
STAGE_VERSION = 1
#: An inherited ASR time may overlap its timed neighbours by at most this much (s), else it is refused.
INHERIT_TOLERANCE_S = 0.1


# --- small helpers --------------------------------------------------------------------------------------


def _sha256_file(path: Path, cache: dict[Path, str] | None = None) -> str:
    key = path.resolve()
    if cache is not None and key in cache:
        return cache[key]
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    value = digest.hexdigest()
    if cache is not None:
        cache[key] = value
    return value


def _sha256_json(value: Any) -> str:
    return hashlib.sha256(json.dumps(value, sort_keys=True, default=str).encode("utf-8")).hexdigest()


def _tokens_digest(words: Sequence[str]) -> str:
    return hashlib.sha256("\n".join(words).encode("utf-8")).hexdigest()


def _write_json(path: Path, value: Any) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_name(path.name + ".part")
    temporary.write_text(json.dumps(value, indent=1, ensure_ascii=False, default=str) + "\n", encoding="utf-8")
    os.replace(temporary, path)


def _read_json(path: Path) -> dict[str, Any] | None:
    try:
        value = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return value if isinstance(value, dict) else None


def _error(error: BaseException) -> str:
    return f"{type(error).__name__}: {error}".replace("\t", " ").replace("\r", " ").replace("\n", " | ")


def _progress(items: Sequence[Any], enabled: bool, desc: str) -> Iterable[Any]:
    if not enabled:
        return items
    from tqdm import tqdm

    return tqdm(items, desc=desc, unit="talk")


def _read_split(prepared_dir: Path, split: str):
    from punctuation.iwslt import read_iwslt

    return read_iwslt(prepared_dir / f"{split}.tsv")


# --- the talks table ------------------------------------------------------------------------------------


def write_talks_table(path: str | Path, rows: Sequence[Mapping[str, Any]]) -> Path:
    """Write the talks table (:data:`TALK_COLUMNS`, tab-separated, empty cell for None) atomically."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    lines = ["\t".join(TALK_COLUMNS)]
    for row in rows:
        cells = []
        for column in TALK_COLUMNS:
            value = row.get(column)
            if value is None:
                cells.append("")
            elif isinstance(value, float):
                cells.append(f"{value:.6f}" if column == "duration_s" else f"{value:g}")
            else:
                cells.append(str(value).replace("\t", " ").replace("\n", " "))
        lines.append("\t".join(cells))
    temporary = path.with_name(path.name + ".part")
    temporary.write_text("\n".join(lines) + "\n", encoding="utf-8")
    os.replace(temporary, path)
    return path


def read_talks_table(path: str | Path) -> list[dict[str, Any]]:
    """Read a talks table written by :func:`write_talks_table` (numbers parsed, empty cells None)."""
    path = Path(path)
    lines = path.read_text(encoding="utf-8").splitlines()
    if not lines or tuple(lines[0].split("\t")) != TALK_COLUMNS:
        raise ValueError(f"{path}: not a talks table (expected the header {' '.join(TALK_COLUMNS)})")
    rows = []
    for number, line in enumerate(lines[1:], start=2):
        if not line:
            continue
        cells = line.split("\t")
        if len(cells) != len(TALK_COLUMNS):
            raise ValueError(f"{path}:{number}: {len(cells)} cells, expected {len(TALK_COLUMNS)}")
        row: dict[str, Any] = {column: (cell if cell != "" else None) for column, cell in zip(TALK_COLUMNS, cells)}
        for column in ("first_token", "tokens"):
            row[column] = int(row[column])
        for column in ("duration_s", "rate", "pitch"):
            row[column] = float(row[column]) if row[column] is not None else None
        rows.append(row)
    return rows


# --- talk audio -----------------------------------------------------------------------------------------


def split_talks(
    prepared_dir: str | Path,
    iwslt_dir: str | Path,
    splits: Iterable[str],
    *,
    talk_sources: Mapping[str, str],
    dev_pseudo_talk_tokens: int,
) -> dict[str, list[Any]]:
    """The :class:`audio.talks.Talk` list of each split (ref/asr: XML sources in ``iwslt_dir``, named by
    ``talk_sources``; dev: pseudo-talks; train: ``train_talks.tsv``). Raises when a split cannot be cut."""
    from audio.talks import pseudo_talks, segment_talks, train_talks

    prepared_dir, iwslt_dir = Path(prepared_dir), Path(iwslt_dir)
    found: dict[str, list[Any]] = {}
    for split in splits:
        if split in ("ref", "asr"):
            if split not in talk_sources:
                raise ValueError(f"talk_sources has no XML file for split {split!r}")
            found[split] = segment_talks(iwslt_dir / talk_sources[split], prepared_dir / f"{split}.tsv").talks
        elif split == "dev":
            data = _read_split(prepared_dir, "dev")
            found[split] = pseudo_talks(data.words, data.labels, target_tokens=dev_pseudo_talk_tokens, prefix="dev")
        elif split == "train":
            found[split] = train_talks(prepared_dir / "train.tsv", prepared_dir / "train_talks.tsv")
        else:
            raise ValueError(f"unknown split {split!r}; expected one of {AUDIO_SPLITS}")
    return found


def _budget(talks: Sequence[Any], limit: int | None) -> tuple[list[Any], list[Any]]:
    """Whole talks in order while the total stays within ``limit`` tokens (None: all); the rest."""
    if limit is None:
        return list(talks), []
    selected, excluded, total = [], [], 0
    for talk in talks:
        if not excluded and total + talk.tokens <= limit:
            selected.append(talk)
            total += talk.tokens
        else:
            excluded.append(talk)
    return selected, excluded


def _take_real(talk: Any, real_audio_dir: Path, split_dir: Path) -> tuple[Path, float, str]:
    """Validate ``<real_audio_dir>/<stem>.wav`` and copy it into ``split_dir`` (unless already there)."""
    from audio.synthesis import talk_stem, timings_path_for, use_real_audio

    found = use_real_audio(real_audio_dir, [talk])[0]  # raises AudioInputError naming the file
    stem = talk_stem(talk.talk_id)
    target = split_dir / f"{stem}.wav"
    marker = split_dir / f"{stem}.real.json"
    stat = found.wav.stat()
    origin = {"source": str(found.wav.resolve()), "size": stat.st_size, "mtime_ns": stat.st_mtime_ns}
    # Synthesis outputs of this talk would pass for ground truth: they go.
    for stale in (timings_path_for(target), split_dir / f"{stem}.json"):
        stale.unlink(missing_ok=True)
    if target.is_file() and _read_json(marker) == {**origin, "copied_size": target.stat().st_size}:
        return target, found.duration, "reused"
    marker.unlink(missing_ok=True)
    split_dir.mkdir(parents=True, exist_ok=True)
    temporary = target.with_name(target.name + ".part")
    shutil.copyfile(found.wav, temporary)
    os.replace(temporary, target)
    _write_json(marker, {**origin, "copied_size": target.stat().st_size})
    return target, found.duration, "copied"


def make_talk_audio(
    prepared_dir: str | Path,
    iwslt_dir: str | Path,
    out_dir: str | Path,
    *,
    source: str,
    real_audio_dir: str | Path | None,
    text: str,
    voices: Sequence[str],
    rate_range: Sequence[float],
    pitch_range: Sequence[float],
    seed: int,
    max_chunk_tokens: int,
    dev_pseudo_talk_tokens: int,
    split_tokens: Mapping[str, int | None],
    talk_sources: Mapping[str, str],
    progress: bool = False,
) -> dict[str, Any]:
    """Audio per talk for the splits in ``split_tokens`` (see the module docstring); returns the report.

    ``source``: ``synthesize`` or ``real``; ``text``: ``punctuated`` (marks reach the engine) or
    ``unpunctuated`` (the control condition); ``voices``: ``engine:voice`` strings; ``split_tokens``: split
    (``ref``/``dev``/``train``) -> token budget or None (all talks); ``asr`` follows ``ref``.
    """
    from audio.synthesis import AudioInputError, synthesize_talks, talk_stem

    started = time.perf_counter()
    prepared_dir, iwslt_dir, out_dir = Path(prepared_dir), Path(iwslt_dir), Path(out_dir)
    if source not in ("synthesize", "real"):
        raise ValueError(f"source must be 'synthesize' or 'real', not {source!r}")
    if source == "real" and not real_audio_dir:
        raise ValueError("source 'real' needs real_audio_dir")
    if text not in ("punctuated", "unpunctuated"):
        raise ValueError(f"text must be 'punctuated' or 'unpunctuated', not {text!r}")
    unknown = sorted(set(split_tokens) - set(MADE_SPLITS))
    if unknown:
        raise ValueError(f"split_tokens: unknown splits {unknown} (audio is made for {list(MADE_SPLITS)}; "
                         "asr shares ref's audio)")
    for split, limit in split_tokens.items():
        if limit is not None and (not isinstance(limit, int) or limit < 0):
            raise ValueError(f"split_tokens.{split} must be a non-negative integer or null, not {limit!r}")
    wanted = [split for split in MADE_SPLITS if split in split_tokens]
    if "ref" in wanted:
        wanted.insert(1, "asr")
    talks_by_split = split_talks(prepared_dir, iwslt_dir, wanted, talk_sources=talk_sources,
                                 dev_pseudo_talk_tokens=dev_pseudo_talk_tokens)
    out_dir.mkdir(parents=True, exist_ok=True)

    rows: list[dict[str, Any]] = []
    compute: dict[str, float] = {}
    for split in wanted:
        talks = talks_by_split[split]
        if split == "asr":
            rows.extend(_asr_rows(talks, [r for r in rows if r["split"] == "ref"]))
            continue
        limit = split_tokens[split]
        selected, excluded = _budget(talks, limit)
        split_dir = out_dir / split
        base = {"split": split}
        made: dict[str, dict[str, Any]] = {}
        if source == "synthesize" and selected:
            result = synthesize_talks(
                selected, split_dir, voices=list(voices), rate_range=tuple(rate_range), pitch_range=tuple(pitch_range),
                punctuated=text == "punctuated", seed=seed, max_chunk_tokens=max_chunk_tokens, progress=progress,
            )
            made = {r["talk"]: r for r in result["per_talk"]}
            compute[split] = result["compute_seconds"]
        for talk in selected:
            row: dict[str, Any] = {**base, "talk": talk.talk_id, "first_token": talk.first_token, "tokens": talk.tokens}
            stem = talk_stem(talk.talk_id)
            if source == "synthesize":
                info = made[talk.talk_id]
                row.update(wav=f"{split}/{stem}.wav", voice=f"{info.get('engine')}:{info.get('voice')}",
                           rate=info.get("rate"), pitch=info.get("pitch"))
                if info["status"] == "failed":
                    row.update(status="failed", action="synthesize", error=info["error"], wav=None)
                else:
                    row.update(status="ok", action="made" if info["status"] == "done" else "reused",
                               duration_s=info.get("duration"))
            else:
                try:
                    began = time.perf_counter()
                    wav, duration, action = _take_real(talk, Path(real_audio_dir), split_dir)  # type: ignore[arg-type]
                    compute[split] = compute.get(split, 0.0) + time.perf_counter() - began
                    row.update(wav=f"{split}/{wav.name}", duration_s=duration, voice="real", status="ok", action=action)
                except (AudioInputError, OSError) as error:
                    row.update(voice="real", status="failed", action="real", error=_error(error))
            rows.append(row)
        for talk in excluded:
            rows.append({**base, "talk": talk.talk_id, "first_token": talk.first_token, "tokens": talk.tokens,
                         "status": "excluded", "error": f"beyond the split's budget of {limit} tokens"})

    write_talks_table(out_dir / TALKS_TABLE, rows)
    report = _audio_report(rows, talks_by_split, prepared_dir, compute, split_tokens)
    report.update(source=source, text=text, voices=list(voices), rate_range=list(rate_range),
                  pitch_range=list(pitch_range), seed=seed, max_chunk_tokens=max_chunk_tokens,
                  dev_pseudo_talk_tokens=dev_pseudo_talk_tokens, out_dir=str(out_dir),
                  seconds=round(time.perf_counter() - started, 1))
    _write_json(out_dir / "audio_report.json", report)
    return report


def _asr_rows(asr_talks: Sequence[Any], ref_rows: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Rows of the ASR talks, pointing at the audio of the reference talk with the same id."""
    by_id = {row["talk"]: row for row in ref_rows}
    rows = []
    for talk in asr_talks:
        row: dict[str, Any] = {"talk": talk.talk_id, "split": "asr", "first_token": talk.first_token,
                               "tokens": talk.tokens}
        ref = by_id.get(talk.talk_id)
        if ref is None:
            row.update(status="failed", error=f"no ref talk {talk.talk_id!r}: nothing to take the audio from")
        elif ref["status"] != "ok":
            row.update(status=ref["status"], error=f"its ref talk has no audio ({ref['status']}: {ref.get('error')})")
        else:
            row.update(wav=ref["wav"], duration_s=ref["duration_s"], voice=ref.get("voice"), rate=ref.get("rate"),
                       pitch=ref.get("pitch"), status="ok", action="shared")
        rows.append(row)
    return rows


def _audio_report(
    rows: Sequence[Mapping[str, Any]],
    talks_by_split: Mapping[str, Sequence[Any]],
    prepared_dir: Path,
    compute: Mapping[str, float],
    split_tokens: Mapping[str, int | None],
) -> dict[str, Any]:
    splits: dict[str, Any] = {}
    for split, talks in talks_by_split.items():
        mine = [row for row in rows if row["split"] == split]
        ok = [row for row in mine if row["status"] == "ok"]
        made = [row for row in ok if row.get("action") in ("made", "copied")]
        seconds = sum(row["duration_s"] or 0.0 for row in ok)
        made_seconds = sum(row["duration_s"] or 0.0 for row in made)
        reasons: dict[str, int] = {}
        for row in mine:
            if row["status"] == "excluded":
                reasons[row["error"]] = reasons.get(row["error"], 0) + 1
        splits[split] = {
            "tokens": sum(talk.tokens for talk in talks),
            "token_budget": split_tokens.get(split) if split != "asr" else split_tokens.get("ref"),
            "talks": len(talks),
            "talks_with_audio": len(ok),
            "talks_failed": sum(row["status"] == "failed" for row in mine),
            "talks_excluded": sum(row["status"] == "excluded" for row in mine),
            "tokens_with_audio": sum(row["tokens"] for row in ok),
            "hours": round(seconds / 3600, 4),
            "minutes": round(seconds / 60, 2),
            "talks_made_this_run": len(made),
            "talks_reused": sum(row.get("action") == "reused" for row in ok),
            "audio_minutes_made_this_run": round(made_seconds / 60, 2),
            "compute_seconds_this_run": round(compute.get(split, 0.0), 1),
            "compute_seconds_per_audio_minute": (
                round(compute[split] / (made_seconds / 60), 3) if compute.get(split) and made_seconds else None
            ),
            "excluded_by_reason": reasons,
            "shares_audio_with": "ref" if split == "asr" else None,
        }
    voices: dict[str, float] = {}
    for row in rows:
        if row["status"] == "ok" and row["split"] != "asr":
            voices[row["voice"]] = round(voices.get(row["voice"], 0.0) + (row["duration_s"] or 0.0) / 60, 2)
    return {
        "hours_total": round(sum(info["hours"] for split, info in splits.items() if split != "asr"), 4),
        "splits": splits,
        "minutes_by_voice": voices,
        "failed": [{"split": r["split"], "talk": r["talk"], "error": r["error"]}
                   for r in rows if r["status"] == "failed"],
    }


# --- alignment ------------------------------------------------------------------------------------------


def _align_config(backend_config: Mapping[str, Any]):
    from aligner import AlignConfig

    known = {f.name for f in dataclasses.fields(AlignConfig)}
    unknown = sorted(set(backend_config) - known)
    if unknown:
        raise ValueError(f"backend_config: unknown settings {unknown}; known: {sorted(known)}")
    values = dict(backend_config)
    if "mfa_args" in values and values["mfa_args"] is not None:
        values["mfa_args"] = tuple(values["mfa_args"])
    return AlignConfig(**values)


def _asr_mapping(asr_words: Sequence[str], ref_words: Sequence[str]) -> list[tuple[int, str] | None]:
    """Per ASR token: ``(ref index, "match" | "substitution")`` from a difflib word alignment, or None.

    Equal blocks map one to one; a replaced run of the same length on both sides maps position by position
    (an ASR substitution takes the time of the word it replaced); insertions and runs of unequal length map
    to nothing.
    """
    mapping: list[tuple[int, str] | None] = [None] * len(asr_words)
    matcher = difflib.SequenceMatcher(None, [w.lower() for w in asr_words], [w.lower() for w in ref_words],
                                      autojunk=False)
    for tag, a1, a2, b1, b2 in matcher.get_opcodes():
        if tag == "equal":
            for k in range(a2 - a1):
                mapping[a1 + k] = (b1 + k, "match")
        elif tag == "replace" and a2 - a1 == b2 - b1:
            for k in range(a2 - a1):
                mapping[a1 + k] = (b1 + k, "substitution")
    return mapping


def _has_time(timing: Any) -> bool:
    return math.isfinite(timing.start) and math.isfinite(timing.end)


def inherit_timings(
    asr_words: Sequence[str],
    own: Sequence[Any],
    ref_words: Sequence[str],
    ref_timings: Sequence[Any] | None,
) -> tuple[list[Any], list[str]]:
    """Timings of ASR tokens: their own alignment where confident, else the reference token's.

    ``own``: one aligner timing per ASR token (on the talk's audio); ``ref_timings``: the reference
    transcript's alignment on the same audio (None when there is none). A token the aligner placed
    confidently keeps its time (``own``). Otherwise, when the word alignment (:func:`_asr_mapping`) gives it a
    reference token with a confident time, and that span does not overlap its timed neighbours by more than
    :data:`INHERIT_TOLERANCE_S`, it takes that span (``inherited``, ``aligned=True``). Else it keeps the
    aligner's estimate (or NaN) with ``aligned=False`` (``none``). Returns ``(timings, sources)``.
    """
    from aligner import WordTiming

    if len(own) != len(asr_words):
        raise ValueError(f"{len(own)} timings for {len(asr_words)} ASR tokens")
    if ref_timings is not None and len(ref_timings) != len(ref_words):
        raise ValueError(f"{len(ref_timings)} reference timings for {len(ref_words)} reference tokens")
    timings: list[Any] = [WordTiming(w, t.start, t.end, bool(t.aligned)) for w, t in zip(asr_words, own)]
    sources = ["own" if t.aligned and _has_time(t) else "none" for t in timings]
    if ref_timings is not None:
        mapping = _asr_mapping(asr_words, ref_words)
        for index, target in enumerate(mapping):
            if sources[index] == "own" or target is None:
                continue
            ref = ref_timings[target[0]]
            if ref.aligned and _has_time(ref):
                timings[index] = WordTiming(asr_words[index], ref.start, ref.end, True)
                sources[index] = "inherited"
        # An inherited span must fit between the timed tokens around it.
        for index, source in enumerate(sources):
            if source != "inherited":
                continue
            before = next((timings[k] for k in range(index - 1, -1, -1) if sources[k] != "none"), None)
            after = next((timings[k] for k in range(index + 1, len(timings)) if sources[k] == "own"), None)
            span = timings[index]
            if (before is not None and span.start < before.end - INHERIT_TOLERANCE_S) or (
                after is not None and span.end > after.start + INHERIT_TOLERANCE_S
            ):
                estimate = own[index]
                timings[index] = WordTiming(asr_words[index], estimate.start, estimate.end, False)
                sources[index] = "none"
    return timings, sources


def _alignment_done(json_path: Path, parquet: Path, fingerprint: str, tokens: int) -> bool:
    meta = _read_json(json_path)
    if meta is None or meta.get("fingerprint") != fingerprint or meta.get("tokens") != tokens:
        return False
    if not parquet.is_file():
        return False
    try:
        import pyarrow.parquet as pq

        return pq.ParquetFile(parquet).metadata.num_rows == tokens
    except Exception:  # noqa: BLE001 -- a damaged file is simply redone
        return False


def align_talks(
    audio_dir: str | Path,
    prepared_dir: str | Path,
    out_dir: str | Path,
    *,
    backend: str,
    backend_config: Mapping[str, Any],
    progress: bool = False,
) -> dict[str, Any]:
    """Align every talk with audio in ``<audio_dir>/talks.tsv`` (see the module docstring); returns the report.

    ``backend``: an :func:`aligner.backend_names` name; ``backend_config``: fields of
    :class:`aligner.AlignConfig` (the rest keep its defaults).
    """
    from aligner import align, read_alignment_table, write_alignment_table, write_textgrid
    from aligner.types import WordTiming
    from audio.synthesis import talk_stem

    started = time.perf_counter()
    audio_dir, prepared_dir, out_dir = Path(audio_dir), Path(prepared_dir), Path(out_dir)
    config = _align_config(backend_config)
    settings = {"backend": backend, "config": dataclasses.asdict(config), "version": STAGE_VERSION}
    rows = read_talks_table(audio_dir / TALKS_TABLE)
    order = {split: position for position, split in enumerate(AUDIO_SPLITS)}
    rows = sorted(rows, key=lambda row: (order.get(row["split"], len(order)), row["first_token"]))
    words_of: dict[str, list[str]] = {}
    hashes: dict[Path, str] = {}
    status: dict[tuple[str, str], dict[str, Any]] = {}
    todo = [row for row in rows if row["status"] == "ok"]
    for row in _progress(todo, progress, "alignment"):
        split, talk = row["split"], row["talk"]
        stem = talk_stem(talk)
        record: dict[str, Any] = {"split": split, "talk": talk}
        status[(split, talk)] = record
        target = out_dir / split
        parquet, grid, meta_path = target / f"{stem}.parquet", target / f"{stem}.TextGrid", target / f"{stem}.json"
        try:
            if split not in words_of:
                words_of[split] = _read_split(prepared_dir, split).words
            words = words_of[split][row["first_token"] : row["first_token"] + row["tokens"]]
            if len(words) != row["tokens"]:
                raise ValueError(f"talk range {row['first_token']}+{row['tokens']} lies outside {split}.tsv")
            wav = audio_dir / row["wav"]
            inputs: dict[str, Any] = {**settings, "wav_sha256": _sha256_file(wav, hashes),
                                      "tokens": _tokens_digest(words)}
            ref_words: list[str] | None = None
            ref_timings: list[Any] | None = None
            if split == "asr":
                ref_row = next((r for r in rows if r["split"] == "ref" and r["talk"] == talk), None)
                ref_meta = _read_json(out_dir / "ref" / f"{stem}.json") if ref_row else None
                ref_status = status.get(("ref", talk), {}).get("status")
                ref_done = ref_meta is not None and ref_status in ("aligned", "skipped")
                inputs["reference_alignment"] = ref_meta["fingerprint"] if ref_done else None
                if ref_done:
                    if "ref" not in words_of:
                        words_of["ref"] = _read_split(prepared_dir, "ref").words
                    ref_words = words_of["ref"][ref_row["first_token"] : ref_row["first_token"] + ref_row["tokens"]]
                    table = read_alignment_table(out_dir / "ref" / f"{stem}.parquet")
                    ref_timings = [WordTiming(w, float(s), float(e), bool(a)) for w, s, e, a in
                                   zip(table["word"], table["start"], table["end"], table["aligned"])]
            fingerprint = _sha256_json(inputs)
            if _alignment_done(meta_path, parquet, fingerprint, len(words)):
                record["status"] = "skipped"
                continue
            meta_path.unlink(missing_ok=True)  # the completion marker goes first
            began = time.perf_counter()
            timings = align(wav, words, config=config, backend=backend)
            sources = ["own" if t.aligned else "none" for t in timings]
            if split == "asr":
                timings, sources = inherit_timings(words, timings, ref_words or [], ref_timings)
            elapsed = time.perf_counter() - began
            write_alignment_table(timings, talk, parquet, sources=sources)
            write_textgrid(timings, grid, row["duration_s"] or 0.0)
            meta = {
                "talk": talk, "split": split, "fingerprint": fingerprint, "tokens": len(words),
                "aligned_tokens": sum(bool(t.aligned) for t in timings), "duration_s": row["duration_s"],
                "compute_seconds": round(elapsed, 3), "wav": row["wav"], "backend": backend,
                "sources": {name: sources.count(name) for name in ASR_SOURCES},
                "reference_alignment": inputs.get("reference_alignment"),
            }
            _write_json(meta_path, meta)
            record["status"] = "aligned"
        except Exception as error:  # noqa: BLE001 -- recorded per talk, the others carry on
            record.update(status="failed", error=_error(error))
            meta_path.unlink(missing_ok=True)  # no stale alignment passes for this talk's
    report = _alignment_report(rows, status, audio_dir, prepared_dir, out_dir, words_of)
    report.update(backend=backend, config=settings["config"], out_dir=str(out_dir),
                  seconds=round(time.perf_counter() - started, 1))
    _write_json(out_dir / "alignment_report.json", report)
    return report


def _read_alignment(path: Path) -> tuple[list[Any], list[str]]:
    from aligner import read_alignment_table
    from aligner.types import WordTiming

    table = read_alignment_table(path)
    timings = [WordTiming(str(w), float(s), float(e), bool(a))
               for w, s, e, a in zip(table["word"], table["start"], table["end"], table["aligned"])]
    if "source" in table:
        sources = [str(s) for s in table["source"]]
    else:
        sources = ["own" if t.aligned else "none" for t in timings]
    return timings, sources


def _alignment_report(
    rows: Sequence[Mapping[str, Any]],
    status: Mapping[tuple[str, str], Mapping[str, Any]],
    audio_dir: Path,
    prepared_dir: Path,
    out_dir: Path,
    words_of: dict[str, list[str]],
) -> dict[str, Any]:
    from aligner.evaluation import boundary_errors, pause_flags, summarise_errors
    from audio.synthesis import read_timings, talk_stem

    splits: dict[str, Any] = {}
    overall: dict[str, list[float]] = {"all": [], "pause": [], "junction": []}
    engine_cache: dict[tuple[str, str], tuple[list[Any], list[bool], list[bool]] | None] = {}

    def engine_reference(split: str, row: Mapping[str, Any]):
        key = (split, row["talk"])
        if key not in engine_cache:
            reference = None
            tsv = audio_dir / split / f"{talk_stem(row['talk'])}.timings.tsv"
            if row.get("voice") != "real" and tsv.is_file():
                timings = read_timings(tsv)
                before, after = pause_flags(timings, row["duration_s"] or 0.0)
                reference = (timings, before, after)
            engine_cache[key] = reference
        return engine_cache[key]

    for split in AUDIO_SPLITS:
        mine = [row for row in rows if row["split"] == split]
        if not mine:
            continue
        with_audio = [row for row in mine if row["status"] == "ok"]
        done = [row for row in with_audio
                if status.get((split, row["talk"]), {}).get("status") in ("aligned", "skipped")]
        errors: dict[str, list[float]] = {"all": [], "pause": [], "junction": []}
        asr_counts = {name: 0 for name in ASR_SOURCES}
        asr_errors: dict[str, list[float]] = {"own": [], "inherited": []}
        tokens = aligned = compute = seconds = 0.0
        scored_talks = 0
        for row in done:
            stem = talk_stem(row["talk"])
            timings, sources = _read_alignment(out_dir / split / f"{stem}.parquet")
            meta = _read_json(out_dir / split / f"{stem}.json") or {}
            tokens += len(timings)
            aligned += sum(t.aligned for t in timings)
            compute += float(meta.get("compute_seconds") or 0.0)
            seconds += row["duration_s"] or 0.0
            if split == "asr":
                for name in sources:
                    asr_counts[name] = asr_counts.get(name, 0) + 1
                ref_row = next((r for r in rows if r["split"] == "ref" and r["talk"] == row["talk"]), None)
                reference = engine_reference("ref", ref_row) if ref_row else None
                if reference is not None:
                    if "ref" not in words_of:
                        words_of["ref"] = _read_split(prepared_dir, "ref").words
                    ref_words = words_of["ref"][ref_row["first_token"] : ref_row["first_token"] + ref_row["tokens"]]
                    mapping = _asr_mapping([t.word for t in timings], ref_words)
                    ref_timings = reference[0]
                    for index, target in enumerate(mapping):
                        if target is None or target[1] != "match" or sources[index] not in asr_errors:
                            continue
                        ref, hyp = ref_timings[target[0]], timings[index]
                        if ref.aligned and hyp.aligned and _has_time(hyp):
                            asr_errors[sources[index]] += [abs(hyp.start - ref.start), abs(hyp.end - ref.end)]
                continue
            reference = engine_reference(split, row)
            if reference is None:
                continue
            scored_talks += 1
            grouped = boundary_errors(reference[0], timings, reference[1], reference[2])
            for name, values in grouped.items():
                errors[name] += values
                overall[name] += values
        info: dict[str, Any] = {
            "talks_with_audio": len(with_audio),
            "talks_aligned": len(done),
            "talks_aligned_this_run": sum(status.get((split, r["talk"]), {}).get("status") == "aligned" for r in done),
            "talks_failed": [
                {"talk": row["talk"], "error": status[(split, row["talk"])].get("error")}
                for row in with_audio if status.get((split, row["talk"]), {}).get("status") == "failed"
            ],
            "hours_aligned": round(seconds / 3600, 4),
            "tokens_in_aligned_talks": int(tokens),
            "tokens_aligned": int(aligned),
            "share_aligned": round(aligned / tokens, 4) if tokens else None,
            "compute_seconds": round(compute, 1),
            "compute_seconds_per_audio_minute": round(compute / (seconds / 60), 3) if seconds else None,
        }
        if split == "asr":
            info["timing_sources"] = asr_counts
            info["timing_shares"] = {k: round(v / tokens, 4) if tokens else None for k, v in asr_counts.items()}
            info["boundary_error_vs_engine_of_matched_ref_token"] = {
                name: summarise_errors(values) for name, values in asr_errors.items()
            }
        else:
            info["talks_with_engine_timings"] = scored_talks
            info["boundary_error"] = {name: summarise_errors(values) for name, values in errors.items()}
        splits[split] = info
    return {
        "hours_aligned_total": round(sum(info["hours_aligned"] for s, info in splits.items() if s != "asr"), 4),
        "boundary_error": {name: summarise_errors(values) for name, values in overall.items()},
        "splits": splits,
        "failed": [dict(record) for record in status.values() if record.get("status") == "failed"],
    }


# --- token features -------------------------------------------------------------------------------------


def _save_npy(path: Path, array: np.ndarray) -> None:
    temporary = path.with_name(path.name + ".part")
    with temporary.open("wb") as handle:
        np.save(handle, array)
    os.replace(temporary, path)


def token_features(
    alignments_dir: str | Path,
    audio_dir: str | Path,
    prepared_dir: str | Path,
    out_dir: str | Path,
    *,
    splits: Sequence[str],
    config: Any,
    progress: bool = False,
) -> dict[str, Any]:
    """Per-token prosodic features and MFCC frames over each split's full token sequence; returns the report.

    ``config``: an :class:`audio.features.FeatureConfig`. See the module docstring for the files.
    """
    from audio.features import FEATURE_NAMES, NEUTRAL_VALUES, RaggedFrames, talk_features
    from audio.synthesis import talk_stem

    started = time.perf_counter()
    alignments_dir, audio_dir = Path(alignments_dir), Path(audio_dir)
    prepared_dir, out_dir = Path(prepared_dir), Path(out_dir)
    unknown = sorted(set(splits) - set(AUDIO_SPLITS))
    if unknown:
        raise ValueError(f"splits: unknown {unknown}; expected some of {AUDIO_SPLITS}")
    rows = read_talks_table(audio_dir / TALKS_TABLE)
    settings = {"config": dataclasses.asdict(config), "version": STAGE_VERSION, "features": list(FEATURE_NAMES)}
    neutral = np.array([NEUTRAL_VALUES[name] for name in FEATURE_NAMES], np.float32)
    width = len(FEATURE_NAMES)
    report_splits: dict[str, Any] = {}
    for split in splits:
        split_started = time.perf_counter()
        words = _read_split(prepared_dir, split).words
        n = len(words)
        values = np.tile(neutral, (n, 1))
        missing = np.ones((n, width), bool)
        has_audio = np.zeros(n, bool)
        counts = np.zeros(n, np.int64)
        pieces: list[np.ndarray] = []
        target = out_dir / split
        cache_dir = target / "talks"
        cache_dir.mkdir(parents=True, exist_ok=True)
        mine = sorted((row for row in rows if row["split"] == split), key=lambda row: row["first_token"])
        outcome = {"computed": 0, "cached": 0, "failed": 0, "no_audio": 0, "not_aligned": 0}
        failures: list[dict[str, str]] = []
        compute = seconds = 0.0
        for row in _progress(mine, progress, f"features {split}"):
            first, count = row["first_token"], row["tokens"]
            if first + count > n:
                failures.append({"talk": row["talk"], "error": f"talk range {first}+{count} outside {split}.tsv ({n})"})
                outcome["failed"] += 1
                continue
            if row["status"] != "ok":
                outcome["no_audio"] += 1
                continue
            stem = talk_stem(row["talk"])
            alignment_meta = _read_json(alignments_dir / split / f"{stem}.json")
            parquet = alignments_dir / split / f"{stem}.parquet"
            if alignment_meta is None or not parquet.is_file():
                outcome["not_aligned"] += 1
                continue
            try:
                fingerprint = _sha256_json({**settings, "alignment": alignment_meta.get("fingerprint"),
                                            "parquet": _sha256_file(parquet)})
                cached_meta = _read_json(cache_dir / f"{stem}.json")
                arrays = None
                if cached_meta is not None and cached_meta.get("fingerprint") == fingerprint:
                    try:
                        with np.load(cache_dir / f"{stem}.npz") as data:
                            arrays = {key: data[key] for key in ("values", "missing", "mfcc", "offsets")}
                        outcome["cached"] += 1
                    except (OSError, ValueError, KeyError):
                        arrays = None
                if arrays is None:
                    (cache_dir / f"{stem}.json").unlink(missing_ok=True)
                    timings, _ = _read_alignment(parquet)
                    if len(timings) != count or [t.word for t in timings] != list(words[first : first + count]):
                        raise ValueError("the alignment's tokens are not the split's tokens of this talk (stale?)")
                    result = talk_features(audio_dir / row["wav"], timings, config=config)
                    arrays = {"values": result.values, "missing": result.missing, "mfcc": result.mfcc.values,
                              "offsets": result.mfcc.offsets}
                    temporary = cache_dir / f"{stem}.npz.part"
                    with temporary.open("wb") as handle:
                        np.savez(handle, **arrays)
                    os.replace(temporary, cache_dir / f"{stem}.npz")
                    cached_meta = {"talk": row["talk"], "fingerprint": fingerprint, "stats": result.stats}
                    _write_json(cache_dir / f"{stem}.json", cached_meta)
                    outcome["computed"] += 1
                if arrays["values"].shape != (count, width) or len(arrays["offsets"]) != count + 1:
                    raise ValueError(f"cached arrays have the wrong shape {arrays['values'].shape}")
            except Exception as error:  # noqa: BLE001 -- recorded per talk, the others carry on
                failures.append({"talk": row["talk"], "error": _error(error)})
                outcome["failed"] += 1
                continue
            values[first : first + count] = arrays["values"]
            missing[first : first + count] = arrays["missing"]
            has_audio[first : first + count] = True
            counts[first : first + count] = np.diff(arrays["offsets"])
            pieces.append(np.asarray(arrays["mfcc"], np.float32))
            compute += float((cached_meta or {}).get("stats", {}).get("compute_seconds") or 0.0)
            seconds += row["duration_s"] or 0.0
        # Never NaN: anything non-finite becomes neutral and missing.
        bad = ~np.isfinite(values)
        if bad.any():
            values[bad] = np.broadcast_to(neutral, values.shape)[bad]
            missing |= bad
        store = RaggedFrames(
            np.concatenate(pieces) if pieces else np.zeros((0, config.n_mfcc), np.float32),
            np.concatenate([[0], np.cumsum(counts)]).astype(np.int64),
        )
        _save_npy(target / "features.npy", values.astype(np.float32))
        _save_npy(target / "missing.npy", missing)
        _save_npy(target / "has_audio.npy", has_audio)
        _save_npy(target / "mfcc.npy", store.values)
        _save_npy(target / "mfcc_offsets.npy", store.offsets)
        _write_json(target / "feature_names.json", list(FEATURE_NAMES))
        timed = ~missing[:, FEATURE_NAMES.index("duration")]
        info = {
            "tokens": n,
            "tokens_with_audio": int(has_audio.sum()),
            "tokens_timed": int(timed.sum()),
            "coverage_audio": round(float(has_audio.mean()), 4) if n else None,
            "coverage_timed": round(float(timed.mean()), 4) if n else None,
            "timed_share_of_tokens_with_audio": (
                round(float(timed.sum() / has_audio.sum()), 4) if has_audio.any() else None
            ),
            "missing_fraction": {name: round(float(missing[:, c].mean()), 4) if n else None
                                 for c, name in enumerate(FEATURE_NAMES)},
            "missing_fraction_within_audio": {
                name: round(float(missing[has_audio, c].mean()), 4) if has_audio.any() else None
                for c, name in enumerate(FEATURE_NAMES)
            },
            "mfcc_frames": int(len(store.values)),
            "audio_minutes": round(seconds / 60, 2),
            "talks": outcome,
            "failed": failures,
            "compute_seconds": round(compute, 1),
            "compute_seconds_per_audio_minute": round(compute / (seconds / 60), 3) if seconds else None,
            "seconds": round(time.perf_counter() - split_started, 1),
        }
        _write_json(target / "report.json", info)
        report_splits[split] = info
    report = {
        "features": list(FEATURE_NAMES),
        "neutral_values": dict(NEUTRAL_VALUES),
        "config": settings["config"],
        "splits": report_splits,
        "out_dir": str(out_dir),
        "seconds": round(time.perf_counter() - started, 1),
    }
    _write_json(out_dir / "features_report.json", report)
    return report


# --- Markdown -------------------------------------------------------------------------------------------


def _ms(summary: Mapping[str, Any] | None) -> str:
    if not summary or not summary.get("n"):
        return "n/a"
    return (f"median {summary['median_ms']:.1f} ms, mean {summary['mean_ms']:.1f} ms, "
            f"{summary['within_20ms']:.1%} within 20 ms, {summary['within_50ms']:.1%} within 50 ms "
            f"(n={summary['n']:,})")


def audio_report_markdown(
    audio: Mapping[str, Any] | None, alignment: Mapping[str, Any] | None, features: Mapping[str, Any] | None
) -> str:
    """The audio half's report (``reports/audio_report.md``) from the three stages' reports (any may be None)."""
    lines = ["# Audio: talk audio, forced alignment, acoustic features", ""]
    if audio:
        lines += [
            f"Source: **{audio['source']}**, text **{audio['text']}**, voices {', '.join(audio['voices'])} "
            f"(rate {audio['rate_range']}, pitch {audio['pitch_range']}, seed {audio['seed']}). "
            f"Audio made: **{audio['hours_total']:.2f} h** in all (ASR shares the ref audio).",
            "",
            "| split | talks | with audio | failed | excluded | tokens | tokens with audio | hours | "
            "compute s per audio min |",
            "|---|---:|---:|---:|---:|---:|---:|---:|---:|",
        ]
        for split, info in audio["splits"].items():
            rate = info["compute_seconds_per_audio_minute"]
            lines.append(
                f"| {split} | {info['talks']} | {info['talks_with_audio']} | {info['talks_failed']} | "
                f"{info['talks_excluded']} | {info['tokens']:,} | {info['tokens_with_audio']:,} | "
                f"{info['hours']:.2f} | "
                f"{rate if rate is not None else '-'} |"
            )
        lines.append("")
        if audio.get("minutes_by_voice"):
            lines.append("Minutes by voice: " + ", ".join(f"{v} {m:.1f}" for v, m in audio["minutes_by_voice"].items()))
            lines.append("")
        excluded = [(split, reason, count) for split, info in audio["splits"].items()
                    for reason, count in info["excluded_by_reason"].items()]
        listed = "; ".join(f"{split}: {count} ({reason})" for split, reason, count in excluded)
        lines.append(f"Excluded talks: {listed or 'none'}.")
        lines.append("Failed talks: " + ("; ".join(f"{f['split']} {f['talk']}: {f['error']}" for f in audio["failed"])
                                        if audio["failed"] else "none") + ".")
        lines.append("")
    if alignment:
        lines += [
            "## Alignment",
            "",
            f"Backend **{alignment['backend']}**; {alignment['hours_aligned_total']:.2f} h aligned. Boundary error "
            f"against the engine's own word timings, all splits: {_ms(alignment['boundary_error']['all'])}; at pauses "
            f"{_ms(alignment['boundary_error']['pause'])}; at word-to-word junctions "
            f"{_ms(alignment['boundary_error']['junction'])}.",
            "",
            "| split | talks aligned | failed | hours | tokens aligned | median ms | within 20 ms | within 50 ms | "
            "compute s per audio min |",
            "|---|---:|---:|---:|---:|---:|---:|---:|---:|",
        ]
        for split, info in alignment["splits"].items():
            error = (info.get("boundary_error") or {}).get("all") or {}
            rate = info["compute_seconds_per_audio_minute"]
            share = f"{info['share_aligned']:.1%}" if info["share_aligned"] is not None else "-"
            lines.append(
                f"| {split} | {info['talks_aligned']}/{info['talks_with_audio']} | {len(info['talks_failed'])} | "
                f"{info['hours_aligned']:.2f} | {share} | {error.get('median_ms') if error.get('n') else '-'} | "
                f"{format(error['within_20ms'], '.1%') if error.get('n') else '-'} | "
                f"{format(error['within_50ms'], '.1%') if error.get('n') else '-'} | "
                f"{'-' if rate is None else rate} |"
            )
        lines.append("")
        asr = alignment["splits"].get("asr")
        if asr:
            counts, shares = asr["timing_sources"], asr["timing_shares"]
            errors = asr["boundary_error_vs_engine_of_matched_ref_token"]
            lines += [
                "ASR tokens (test2011asr, aligned on the reference talk's audio): "
                + ", ".join(f"{name} {counts[name]:,} ({shares[name]:.1%})" if shares[name] is not None else
                            f"{name} {counts[name]:,}" for name in ASR_SOURCES)
                + ". Own timings of ASR tokens that match a reference token, against the engine's timing of that "
                f"token: {_ms(errors['own'])}; inherited: {_ms(errors['inherited'])}.",
                "",
            ]
        failed = alignment.get("failed") or []
        lines.append("Alignment failures: " + ("; ".join(f"{f['split']} {f['talk']}: {f.get('error')}" for f in failed)
                                              if failed else "none") + ".")
        lines.append("")
    if features:
        lines += [
            "## Acoustic features",
            "",
            f"Features ({len(features['features'])}): {', '.join(features['features'])}. Arrays cover each split's "
            "full token sequence; tokens without audio or time are flagged in `missing.npy` (neutral values, "
            "never NaN).",
            "",
            "| split | tokens | with audio | timed | timed share of audio tokens | f0 missing within audio | "
            "MFCC frames | compute s per audio min |",
            "|---|---:|---:|---:|---:|---:|---:|---:|",
        ]
        for split, info in features["splits"].items():
            within = info["timed_share_of_tokens_with_audio"]
            f0 = info["missing_fraction_within_audio"].get("f0_mean")
            rate = info["compute_seconds_per_audio_minute"]
            lines.append(
                f"| {split} | {info['tokens']:,} | {info['tokens_with_audio']:,} | {info['tokens_timed']:,} | "
                f"{format(within, '.1%') if within is not None else '-'} | "
                f"{format(f0, '.1%') if f0 is not None else '-'} | "
                f"{info['mfcc_frames']:,} | {rate if rate is not None else '-'} |"
            )
        failed = [(split, f) for split, info in features["splits"].items() for f in info["failed"]]
        lines += ["", "Feature failures: " + ("; ".join(f"{s} {f['talk']}: {f['error']}" for s, f in failed)
                                             if failed else "none") + "."]
        lines.append("")
    return "\n".join(lines)
