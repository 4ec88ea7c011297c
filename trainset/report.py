"""The data-preparation report (``reports/data_report.md``): the report of
:func:`trainset.prepare.prepare_data` rendered as Markdown."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from corpus.labels import LABELS

__all__ = ["report_markdown"]


def _table(header: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join(" --- " for _ in header) + "|"]
    lines += ["| " + " | ".join(str(cell) for cell in row) + " |" for row in rows]
    return "\n".join(lines)


def _fmt_int(value: Any) -> str:
    return f"{value:,}" if isinstance(value, int) else str(value)


def report_markdown(report: Mapping[str, Any]) -> str:
    """Render the report of :func:`prepare_data` as a Markdown document."""
    params = report["parameters"]
    talks = report["talks"]
    overlap = report["overlap"]
    splits = list(report["eval_splits"])
    out: list[str] = ["# Data preparation report", ""]
    out += [
        "Training data rebuilt from TED transcripts (the benchmark's `train2012` is not available); every talk "
        "overlapping an evaluation split is excluded. Tokenisation rules: `corpus/text.py`.",
        "",
        "## Parameters",
        "",
        _table(["parameter", "value"], [(key, f"`{value}`") for key, value in params.items()]),
        "",
        "## Tokens",
        "",
        _table(["split", "tokens"], [(split, _fmt_int(count)) for split, count in report["tokens"].items()]),
        "",
        "## Talks",
        "",
        _table(
            ["", "talks"],
            [
                ("in the TED file", _fmt_int(talks["available"])),
                ("excluded", _fmt_int(talks["excluded"])),
                *[(f"excluded: {reason}", _fmt_int(n)) for reason, n in talks["excluded_by_reason"].items()],
                ("eligible for training", _fmt_int(talks["eligible"])),
                ("used for training", _fmt_int(talks["kept"])),
            ],
        ),
        "",
    ]
    if talks.get("truncated"):
        cut = talks["truncated"]
        out += [
            f"The last training talk, `{cut['talk']}`, was cut to {cut['tokens_kept']:,} of its "
            f"{cut['tokens_in_talk']:,} tokens to meet the budget.",
            "",
        ]
    dist = report["label_distribution"]
    out += [
        "## Label distribution (%)",
        "",
        _table(["split", *LABELS], [(name, *(f"{values[label]:.2f}" for label in LABELS)) for name, values in dist.items()]),
        "",
        "## Evaluation splits",
        "",
        _table(
            [
                "split",
                "file",
                "tokens",
                f"{overlap['ngram']}-grams",
                "n-grams found in excluded talks",
                "tokens inside them",
                "n-grams shared with kept talks",
                "excluded talks",
                "invalid-byte lines",
                "empty-word lines dropped",
            ],
            [
                (
                    split,
                    f"`{info['file']}`",
                    _fmt_int(info["tokens"]),
                    _fmt_int(info["ngrams"]),
                    f"{info['ngram_coverage_by_excluded_talks']:.2%}",
                    f"{info['token_coverage_by_excluded_talks']:.2%}",
                    f"{info['ngram_share_with_kept_talks']:.2%}",
                    info["excluded_talks"],
                    info["replaced_invalid_byte_lines"],
                    len(info["skipped_empty_word_lines"]),
                )
                for split, info in report["eval_splits"].items()
            ],
        ),
        "",
        "Coverage: the share of each split's n-grams (and of its tokens, inside such an n-gram) that the excluded "
        "talks contain; what is left is mostly wording edited between the benchmark's and the crawl's "
        "transcripts (and, for ASR, recognition errors). The longest stretch of each split found in no excluded "
        "talk:",
        "",
        _table(
            ["split", "tokens", "starts with"],
            [
                (split, _fmt_int(info["longest_uncovered_run"]["tokens"]), f"`{info['longest_uncovered_run']['starts_with']}`")
                for split, info in report["eval_splits"].items()
            ],
        ),
        "",
        "## Overlap exclusion",
        "",
        f"A talk is excluded when at least {overlap['min_shared_fraction']:.1%} of its distinct "
        f"{overlap['ngram']}-grams occur in {', '.join(f'`{s}`' for s in splits)}.",
        "",
        overlap["threshold_rationale"],
        "",
        "Distribution of the shared fraction over all non-empty talks:",
        "",
        _table(["shared fraction", "talks"], [(row["range"], row["talks"]) for row in overlap["histogram"]]),
        "",
        f"Highest shared fractions among kept talks: {', '.join(f'{f:.2%}' for f in overlap['top_kept_fractions'])}.",
        "",
        "### Excluded talks",
        "",
        _table(
            ["talk", "splits", "shared fraction", "tokens"],
            [
                (row["talk"], ", ".join(row["splits"]), f"{row['shared_fraction']:.2%}", _fmt_int(row["tokens"]))
                for row in overlap["excluded_talks"]
            ],
        ),
        "",
    ]
    if overlap["empty_talks"]:
        out += [
            "### Talks with no words after normalisation",
            "",
            "Music or dance performances whose transcript is only stage notes:",
            "",
            *[f"- {name}" for name in overlap["empty_talks"]],
            "",
        ]
    if overlap.get("too_short_talks"):
        out += [
            f"### Talks too short to check (fewer than {overlap['ngram']} words)",
            "",
            *[f"- {name}" for name in overlap["too_short_talks"]],
            "",
        ]
    return "\n".join(out)
