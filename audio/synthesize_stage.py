"""The ``synthesize`` stage as a library function: audio for every talk of the splits, and the talks table.

Wrapped by ``pipeline/synthesize.py`` (which reads the arguments from ``params.yaml``); resumable talk by
talk, a failing talk is recorded with its error and the others carry on (the stage then exits non-zero).

:func:`make_talk_audio` -> ``<audio_dir>``
    Cuts the prepared splits into talks (:mod:`corpus.talks`): ``ref`` (test2011) and ``asr`` (test2011asr)
    into the 8 talks of their XML sources, ``dev`` into pseudo-talks, ``train`` by ``train_talks.tsv``. Per
    split, whole talks are taken in order while the split's total stays within ``split_tokens[split]``
    (``None``: every talk); the rest are *excluded* (listed, with the reason). Each taken talk is read aloud
    by :func:`audio.synthesis.synthesize_talks` (voice, rate and pitch drawn per talk; the engine's word
    timings are kept as ground truth) into ``<audio_dir>/<split>/<stem>.wav`` (+ ``.timings.tsv``, ``.json``),
    or, with ``source="real"``, ``<real_audio_dir>/<stem>.wav`` is validated and copied there (no synthesis,
    no ground truth), or, with ``source="tedlium"``, the talk's TED-LIUM recording is found by name and text and
    converted there, with the anchors its STM segments give (:mod:`audio.tedlium`; talks no recording matches
    are *excluded*, and the budget counts only talks with a recording; every recording left unmatched is listed
    with the reason in the report and in ``<audio_dir>/tedlium_matches.tsv``). Ref and ASR are two transcripts
    of the same talks, so the audio is made once, from the reference text; the ``asr`` rows of the talks table
    point at the ``ref`` talk's WAV. Writes ``<audio_dir>/talks.tsv`` (:mod:`corpus.talks_table`) and
    ``<audio_dir>/audio_report.json``.
"""

from __future__ import annotations

import dataclasses
import shutil
import time
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from aligner.audio import wav_truncation
from audio.real_audio import AudioInputError, use_real_audio
from audio.stage_common import AUDIO_SPLITS, error_text, read_json, read_split, write_json
from audio.synthesis import synthesize_talks, talk_stem
from audio.tedlium import (TedliumConfig, match_recordings, read_recordings, take_tedlium_talk, transcript_key,
                           xml_titles)
from corpus.anchors import anchors_path_for
from corpus.io import atomic_path, atomic_write_text, split_run_facts
from corpus.talks import pseudo_talks, segment_talks, train_talks
from corpus.talks_table import TALKS_TABLE, write_talks_table

__all__ = ["MADE_SPLITS", "SOURCES", "TEDLIUM_MATCHES", "make_talk_audio", "split_talks"]

#: Splits whose audio is made (``split_tokens`` keys).
MADE_SPLITS: tuple[str, ...] = ("ref", "dev", "train")
#: Where the audio comes from (params ``audio.source``).
SOURCES: tuple[str, ...] = ("synthesize", "real", "tedlium")
#: Every TED-LIUM recording and what became of it, in the audio folder (``source="tedlium"``).
TEDLIUM_MATCHES = "tedlium_matches.tsv"
#: How many unmatched TED-LIUM recordings the report lists (``tedlium_matches.tsv`` has them all).
UNMATCHED_LISTED = 50
#: The reason a talk without a TED-LIUM recording is excluded.
NO_RECORDING = "no TED-LIUM recording matched (by speaker name and text)"


#: What a talk's audio found from an earlier run (action ``reused``) reads as in the talks table, by its voice
REUSED_AS = {"real": "copied", "tedlium": "converted"}


def _drop_other_sources(split_dir: Path, stem: str, keep: str) -> None:
    """Remove what another audio source left for this talk (its files would pass for this source's)."""
    stale = {"synthesize": [split_dir / f"{stem}.timings.tsv", split_dir / f"{stem}.json"],
             "real": [split_dir / f"{stem}.real.json"],
             "tedlium": [split_dir / f"{stem}.tedlium.json", anchors_path_for(split_dir / f"{stem}.wav")]}
    for source, paths in stale.items():
        if source != keep:
            for path in paths:
                path.unlink(missing_ok=True)


def split_talks(
    prepared_dir: str | Path,
    iwslt_dir: str | Path,
    splits: Iterable[str],
    *,
    talk_sources: Mapping[str, str],
    dev_pseudo_talk_tokens: int,
) -> dict[str, list[Any]]:
    """The :class:`corpus.talks.Talk` list of each split (ref/asr: XML sources in ``iwslt_dir``, named by
    ``talk_sources``; dev: pseudo-talks; train: ``train_talks.tsv``). Raises when a split cannot be cut."""
    prepared_dir, iwslt_dir = Path(prepared_dir), Path(iwslt_dir)
    found: dict[str, list[Any]] = {}
    for split in splits:
        if split in ("ref", "asr"):
            if split not in talk_sources:
                raise ValueError(f"talk_sources has no XML file for split {split!r}")
            found[split] = segment_talks(iwslt_dir / talk_sources[split], prepared_dir / f"{split}.tsv").talks
        elif split == "dev":
            data = read_split(prepared_dir, "dev")
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
    found = use_real_audio(real_audio_dir, [talk])[0]  # raises AudioInputError naming the file
    truncated = wav_truncation(found.wav)
    if truncated is not None:
        raise AudioInputError(f"{found.wav}: truncated: its header states {truncated[0]:.2f} s of audio, the file "
                              f"holds {truncated[1]:.2f} s")
    stem = talk_stem(talk.talk_id)
    target = split_dir / f"{stem}.wav"
    marker = split_dir / f"{stem}.real.json"
    stat = found.wav.stat()
    origin = {"source": str(found.wav.resolve()), "size": stat.st_size, "mtime_ns": stat.st_mtime_ns}
    # Synthesis outputs of this talk would pass for ground truth, TED-LIUM anchors for its own: they go.
    _drop_other_sources(split_dir, stem, "real")
    if target.is_file() and read_json(marker) == {**origin, "copied_size": target.stat().st_size}:
        return target, found.duration, "reused"
    marker.unlink(missing_ok=True)
    with atomic_path(target) as temporary:
        shutil.copyfile(found.wav, temporary)
    write_json(marker, {**origin, "copied_size": target.stat().st_size})
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
    tedlium_dir: str | Path | None = None,
    tedlium: TedliumConfig | None = None,
    progress: bool = False,
) -> dict[str, Any]:
    """Audio per talk for the splits in ``split_tokens`` (see the module docstring); returns the report.

    ``source``: ``synthesize``, ``real`` or ``tedlium``; ``text``: ``punctuated`` (marks reach the engine) or
    ``unpunctuated`` (the control condition); ``voices``: ``engine:voice`` strings; ``split_tokens``: split
    (``ref``/``dev``/``train``) -> token budget or None (all talks); ``asr`` follows ``ref``. ``tedlium_dir``
    and ``tedlium`` (:class:`audio.tedlium.TedliumConfig`) are read with ``source="tedlium"`` only.
    """
    started = time.perf_counter()
    prepared_dir, iwslt_dir, out_dir = Path(prepared_dir), Path(iwslt_dir), Path(out_dir)
    if source not in SOURCES:
        raise ValueError(f"source must be one of {', '.join(map(repr, SOURCES))}, not {source!r}")
    if source == "real" and not real_audio_dir:
        raise ValueError("source 'real' needs real_audio_dir")
    if source == "tedlium" and (not tedlium_dir or tedlium is None):
        raise ValueError("source 'tedlium' needs tedlium_dir and its settings (tedlium)")
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

    recordings = matching = None
    matched: dict[str, tuple[str, float]] = {}
    anchor_stats: dict[str, dict[str, Any]] = {}
    if source == "tedlium":
        recordings = read_recordings(tedlium_dir)  # type: ignore[arg-type]
        titles = {"ref": xml_titles(iwslt_dir / talk_sources["ref"])} if "ref" in talks_by_split else {}
        matching = match_recordings(recordings, {s: t for s, t in talks_by_split.items() if s != "asr"}, titles,
                                    tedlium)  # type: ignore[arg-type]
        matched = matching.by_transcript()

    rows: list[dict[str, Any]] = []
    compute: dict[str, float] = {}
    for split in wanted:
        talks = talks_by_split[split]
        if split == "asr":
            rows.extend(_asr_rows(talks, [r for r in rows if r["split"] == "ref"]))
            continue
        limit = split_tokens[split]
        without_recording: list[Any] = []
        if source == "tedlium":
            without_recording = [t for t in talks if transcript_key(split, t.talk_id) not in matched]
            talks = [t for t in talks if transcript_key(split, t.talk_id) in matched]
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
                _drop_other_sources(split_dir, talk_stem(talk.talk_id), "synthesize")
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
            elif source == "tedlium":
                recording = matched[transcript_key(split, talk.talk_id)][0]
                try:
                    began = time.perf_counter()
                    wav, duration, action, stats = take_tedlium_talk(
                        talk, recordings.talks[recording], recordings.segments[recording], split_dir,  # type: ignore[union-attr]
                        tedlium)  # type: ignore[arg-type]
                    compute[split] = compute.get(split, 0.0) + time.perf_counter() - began
                    anchor_stats[transcript_key(split, talk.talk_id)] = stats
                    row.update(wav=f"{split}/{wav.name}", duration_s=duration, voice="tedlium", status="ok",
                               action=action)
                except (AudioInputError, OSError, ValueError) as error:
                    row.update(voice="tedlium", status="failed", action="tedlium",
                               error=error_text(error) + f" (recording {recording})")
            else:
                try:
                    began = time.perf_counter()
                    wav, duration, action = _take_real(talk, Path(real_audio_dir), split_dir)  # type: ignore[arg-type]
                    compute[split] = compute.get(split, 0.0) + time.perf_counter() - began
                    row.update(wav=f"{split}/{wav.name}", duration_s=duration, voice="real", status="ok", action=action)
                except (AudioInputError, OSError) as error:
                    row.update(voice="real", status="failed", action="real", error=error_text(error))
            rows.append(row)
        for talk in excluded:
            rows.append({**base, "talk": talk.talk_id, "first_token": talk.first_token, "tokens": talk.tokens,
                         "status": "excluded", "error": f"beyond the split's budget of {limit} tokens"})
        for talk in without_recording:
            rows.append({**base, "talk": talk.talk_id, "first_token": talk.first_token, "tokens": talk.tokens,
                         "status": "excluded", "error": NO_RECORDING})

    # The table lies in a DVC output: it says how each talk's audio was obtained, not whether this run did it
    # (a talk found from an earlier run reads as when it was made), so a resumed run writes the same bytes.
    write_talks_table(out_dir / TALKS_TABLE, [
        {**row, "action": REUSED_AS.get(row.get("voice"), "made")} if row.get("action") == "reused" else row
        for row in rows])
    report = _audio_report(rows, talks_by_split, prepared_dir, compute, split_tokens)
    report.update(source=source, text=text, voices=list(voices), rate_range=list(rate_range),
                  pitch_range=list(pitch_range), seed=seed, max_chunk_tokens=max_chunk_tokens,
                  dev_pseudo_talk_tokens=dev_pseudo_talk_tokens, out_dir=str(out_dir),
                  seconds=round(time.perf_counter() - started, 1))
    if source == "tedlium":
        report["tedlium"] = _tedlium_report(recordings, matching, rows, anchor_stats, tedlium, out_dir)
    write_json(out_dir / "audio_report.json", split_run_facts(report)[0])  # the output: no run times
    return report


def _tedlium_report(recordings: Any, matching: Any, rows: Sequence[Mapping[str, Any]],
                    anchor_stats: Mapping[str, Mapping[str, Any]], config: TedliumConfig, out_dir: Path
                    ) -> dict[str, Any]:
    """What became of every TED-LIUM recording (also written to ``tedlium_matches.tsv``)."""
    status = {transcript_key(row["split"], row["talk"]): row for row in rows if row["split"] != "asr"}
    lines = ["recording\tstatus\tsplit\ttalk\toverlap\treason"]
    for recording in sorted(recordings.talks):
        if recording in matching.matches:
            key, overlap = matching.matches[recording]
            split, talk = key.split("/", 1)
            row = status.get(key, {})
            state = {"ok": "used"}.get(row.get("status"), row.get("status") or "matched")
            reason = row.get("error") or ""
            lines.append(f"{recording}\t{state}\t{split}\t{talk}\t{overlap:.4f}\t{reason}")
        else:
            lines.append(f"{recording}\tunmatched\t\t\t\t{matching.unmatched[recording]}")
    atomic_write_text(out_dir / TEDLIUM_MATCHES, "\n".join(lines) + "\n")
    anchored = [stats for stats in anchor_stats.values() if stats.get("anchored")]
    shares = sorted(float(stats.get("matched_share", 0.0)) for stats in anchor_stats.values())
    talks_matched: dict[str, int] = {}
    for key in matching.by_transcript():
        split = key.split("/", 1)[0]
        talks_matched[split] = talks_matched.get(split, 0) + 1
    return {
        "dir": str(recordings.root),
        "config": dataclasses.asdict(config),
        "recordings": len(recordings.talks),
        "recordings_matched": len(matching.matches),
        "talks_matched": talks_matched,
        # the first UNMATCHED_LISTED of them here; every one in the matches file
        "recordings_unmatched_count": len(matching.unmatched),
        "recordings_unmatched": [{"recording": r, "reason": why}
                                 for r, why in sorted(matching.unmatched.items())[:UNMATCHED_LISTED]],
        "layout_problems": list(recordings.problems),
        "talks_with_audio": len(anchor_stats),
        "talks_anchored": len(anchored),
        "anchor_chunks": sum(int(stats.get("chunks", 1)) for stats in anchor_stats.values()),
        "median_share_of_words_in_stm": shares[len(shares) // 2] if shares else None,
        "matches_file": str(out_dir / TEDLIUM_MATCHES),
    }


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
        made = [row for row in ok if row.get("action") in ("made", "copied", "converted")]
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
            "talks_reused_this_run": sum(row.get("action") == "reused" for row in ok),
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
