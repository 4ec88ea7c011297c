"""The audio half's Markdown report (``reports/audio_report.md``) from the JSON reports of its three stages:
talk audio (:mod:`audio.synthesize_stage`), forced alignment (:mod:`audio.align_stage`) and acoustic features
(:mod:`audio.features_stage`). What the stages made, never how long they took (the report is a stage output:
the same bytes at every rerun); throughput is ``python -m benchmarks.alignment_throughput``'s."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from audio.stage_common import ASR_SOURCES

__all__ = ["audio_report_markdown"]


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
            "| split | talks | with audio | failed | excluded | tokens | tokens with audio | hours |",
            "|---|---:|---:|---:|---:|---:|---:|---:|",
        ]
        for split, info in audio["splits"].items():
            lines.append(
                f"| {split} | {info['talks']} | {info['talks_with_audio']} | {info['talks_failed']} | "
                f"{info['talks_excluded']} | {info['tokens']:,} | {info['tokens_with_audio']:,} | "
                f"{info['hours']:.2f} |"
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
        tedlium = audio.get("tedlium")
        if tedlium:
            unmatched, more = tedlium["recordings_unmatched"], tedlium["recordings_unmatched_count"] - 10
            shown = "; ".join(f"{item['recording']} ({item['reason']})" for item in unmatched[:10])
            lines += [
                f"TED-LIUM ({tedlium['dir']}): {tedlium['recordings_matched']} of {tedlium['recordings']} recordings "
                f"matched to talks by speaker name and text (by split: "
                + (", ".join(f"{split} {count}" for split, count in tedlium["talks_matched"].items()) or "none")
                + f"); {tedlium['talks_anchored']} of {tedlium['talks_with_audio']} talks aligned in "
                f"{tedlium['anchor_chunks']} chunks anchored by the STM segments. Unmatched recordings: "
                + (shown or "none") + (f"; and {more} more" if more > 0 else "")
                + " (every recording: `tedlium_matches.tsv` in the audio folder).",
                "",
            ]
            if tedlium["layout_problems"]:
                lines += ["TED-LIUM files without their pair: " + "; ".join(tedlium["layout_problems"]) + ".", ""]
    if alignment:
        lines += [
            "## Alignment",
            "",
            f"Backend **{alignment['backend']}**; {alignment['hours_aligned_total']:.2f} h aligned. Boundary error "
            f"against the engine's own word timings, all splits: {_ms(alignment['boundary_error']['all'])}; at pauses "
            f"{_ms(alignment['boundary_error']['pause'])}; at word-to-word junctions "
            f"{_ms(alignment['boundary_error']['junction'])}.",
            "",
            "| split | talks aligned | failed | hours | tokens aligned | median ms | within 20 ms | within 50 ms |",
            "|---|---:|---:|---:|---:|---:|---:|---:|",
        ]
        for split, info in alignment["splits"].items():
            error = (info.get("boundary_error") or {}).get("all") or {}
            share = f"{info['share_aligned']:.1%}" if info["share_aligned"] is not None else "-"
            lines.append(
                f"| {split} | {info['talks_aligned']}/{info['talks_with_audio']} | {len(info['talks_failed'])} | "
                f"{info['hours_aligned']:.2f} | {share} | {error.get('median_ms') if error.get('n') else '-'} | "
                f"{format(error['within_20ms'], '.1%') if error.get('n') else '-'} | "
                f"{format(error['within_50ms'], '.1%') if error.get('n') else '-'} |"
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
            "MFCC frames |",
            "|---|---:|---:|---:|---:|---:|---:|",
        ]
        for split, info in features["splits"].items():
            within = info["timed_share_of_tokens_with_audio"]
            f0 = info["missing_fraction_within_audio"].get("f0_mean")
            lines.append(
                f"| {split} | {info['tokens']:,} | {info['tokens_with_audio']:,} | {info['tokens_timed']:,} | "
                f"{format(within, '.1%') if within is not None else '-'} | "
                f"{format(f0, '.1%') if f0 is not None else '-'} | {info['mfcc_frames']:,} |"
            )
        failed = [(split, f) for split, info in features["splits"].items() for f in info["failed"]]
        lines += ["", "Feature failures: " + ("; ".join(f"{s} {f['talk']}: {f['error']}" for s, f in failed)
                                             if failed else "none") + "."]
        lines.append("")
    return "\n".join(lines)
