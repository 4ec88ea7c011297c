"""Talk-level segmentation of the benchmark splits, so that audio can be made (and read) one talk at a time.

Every split is a flat token sequence (``word<TAB>LABEL``); speech comes per talk. This module cuts each split
into :class:`Talk` objects -- contiguous token ranges ``[first_token, first_token + tokens)`` that cover the
split exactly once, in order -- so that per-talk audio, word timings and features can be laid back onto the
split's token sequence.

``test2011`` (Ref) and ``test2011asr`` (ASR): :func:`segment_talks` / :func:`test_talks`
    Their sources, ``IWSLT12.TED.MT.tst2011.en-fr.en.xml`` and
    ``IWSLT12.TED.SLT.tst2011.en-fr.en.system0.comma.xml``, hold the 8 talks as ``<doc docid="...">`` with
    ``<seg>`` lines. Each document is normalised with :func:`corpus.text.normalize_transcript` (the
    function that reproduces ``test2011`` at 99.96 %); the documents, put in the order in which they occur in
    the split (median position of their 6-grams that occur once in the split), are concatenated and aligned
    with the split's tokens by :class:`difflib.SequenceMatcher` (``autojunk=False``). A split token inside a
    matching block gets the docid of the XML token it matched (*matched*). A token in no block (benchmark
    artefacts such as mangled music notes or ``/seg``, and ASR tokens the preparer changed) gets the talk of
    the token before it (of the first matched token at the very start), so a gap at a talk change goes to
    the talk it follows; these tokens are *filled* and listed in the report. Talks come out in split order.
    The segmentation is refused (:class:`TalkSegmentationError`) when a docid would occur in two separate
    ranges, when a document matched no token at all, or when fewer than ``min_matched_fraction`` (95 %) of
    the tokens matched (the XML is not the source of the split).
    Measured on the shared data (``tests/test_corpus_talks.py``): Ref 8 talks, 12,626 tokens, 12,621 matched,
    5 filled (one ``/seg`` tag and four tokens with mangled music notes); ASR 8 talks, 12,822 tokens, 12,821
    matched, 1 filled (an ASR ``right`` the XML lacks). Every talk's range has the token count of its
    normalised document, to within one token.

``train``: :func:`train_talks`
    ``train_talks.tsv`` (``talk first_token tokens``, written by the prepare stage) already gives the ranges.

``dev2012``: :func:`pseudo_talks`
    The file has no talk boundaries except ten ``/transcript`` tags (talk ends the preparer left in; the
    mangled ``\\ufffd?/transcript`` spelling included), far fewer than the ~115 talks it was cut from. It is
    cut into *pseudo-talks*: a hard cut after every ``/transcript`` token, and within each part a cut at the
    first sentence end (PERIOD/QUESTION) at or after ``target_tokens`` tokens (default 1,500, about a
    10-minute talk at TED's ~150 words per minute; a hard cut at ``2 * target_tokens`` if no sentence end
    comes). A remainder shorter than ``target_tokens / 4`` is merged into the pseudo-talk before it.
    Pseudo-talks are named ``<prefix>-NNN``. They are units of synthesis only (voice, rate and pitch change
    at their edges); nothing claims they are real talks.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from corpus.iwslt import read_iwslt
from corpus.labels import SENTENCE_END_LABELS
from corpus.text import normalize_transcript

__all__ = [
    "Talk",
    "TalkSegmentation",
    "TalkSegmentationError",
    "check_cover",
    "pseudo_talks",
    "read_xml_documents",
    "segment_talks",
    "talks_from_ranges",
    "test_talks",
    "train_talks",
]

_DOC = re.compile(r"<doc\b[^>]*?\bdocid=\"(?P<docid>[^\"]+)\"[^>]*>(?P<body>.*?)</doc>", re.S)
_SEG = re.compile(r"<seg\b[^>]*>(?P<text>.*?)</seg>", re.S)
#: dev2012's talk-end tags, with and without the mangled music note glued in front.
_TRANSCRIPT_END = re.compile(r"^(?:\ufffd\??)*/transcript$")


class TalkSegmentationError(ValueError):
    """A split cannot be cut into talks (names the files and what disagrees)."""


@dataclass(frozen=True)
class Talk:
    """One talk: the token range ``[first_token, first_token + tokens)`` of its split, with its words/labels."""

    talk_id: str
    first_token: int
    tokens: int
    words: tuple[str, ...]
    labels: tuple[str, ...]

    def __post_init__(self) -> None:
        if len(self.words) != self.tokens or len(self.labels) != self.tokens:
            raise ValueError(
                f"talk {self.talk_id!r}: {self.tokens} tokens but {len(self.words)} words, {len(self.labels)} labels"
            )

    @property
    def end_token(self) -> int:
        return self.first_token + self.tokens


@dataclass
class TalkSegmentation:
    """Talks of a split and how they were found (``report`` is JSON-serialisable)."""

    talks: list[Talk]
    report: dict[str, Any] = field(default_factory=dict)


def talks_from_ranges(
    words: Sequence[str], labels: Sequence[str], ranges: Sequence[tuple[str, int, int]]
) -> list[Talk]:
    """Talks from ``(talk_id, first_token, tokens)`` rows; the rows must cover ``words`` in order, once."""
    talks = [
        Talk(talk_id, first, count, tuple(words[first : first + count]), tuple(labels[first : first + count]))
        for talk_id, first, count in ranges
    ]
    check_cover(talks, len(words))
    return talks


def check_cover(talks: Sequence[Talk], total_tokens: int) -> None:
    """Raise ``ValueError`` unless ``talks`` tile ``[0, total_tokens)`` in order with unique ids."""
    position = 0
    seen: set[str] = set()
    for talk in talks:
        if talk.talk_id in seen:
            raise ValueError(f"talk id {talk.talk_id!r} occurs twice")
        seen.add(talk.talk_id)
        if talk.first_token != position:
            raise ValueError(f"talk {talk.talk_id!r} starts at token {talk.first_token}, expected {position}")
        if talk.tokens <= 0:
            raise ValueError(f"talk {talk.talk_id!r} is empty")
        position += talk.tokens
    if position != total_tokens:
        raise ValueError(f"talks cover {position} tokens, the split has {total_tokens}")


# --- test2011 / test2011asr: XML documents aligned to the token sequence -------------------------------


def read_xml_documents(xml_path: str | Path) -> list[tuple[str, str]]:
    """``(docid, text)`` per ``<doc>`` of an IWSLT/mteval XML file, in file order (segments joined by spaces).

    Parsed with regular expressions rather than an XML parser, as the benchmark's own tools do: the files are
    not always well-formed XML, and the segment text is normalised afterwards anyway (entities included).
    """
    xml_path = Path(xml_path)
    text = xml_path.read_text(encoding="utf-8", errors="replace")
    documents = [
        (match.group("docid"), " ".join(seg.group("text") for seg in _SEG.finditer(match.group("body"))))
        for match in _DOC.finditer(text)
    ]
    if not documents:
        raise TalkSegmentationError(f"{xml_path}: no <doc docid=...> element found")
    ids = [docid for docid, _ in documents]
    if len(set(ids)) != len(ids):
        raise TalkSegmentationError(f"{xml_path}: duplicate docids {sorted({d for d in ids if ids.count(d) > 1})}")
    return documents


def _split_order(words: Sequence[str], documents: Sequence[Sequence[str]], n: int = 6) -> list[int]:
    """Document indices sorted by where each document sits in the split (median position of its n-grams)."""
    positions: dict[tuple[str, ...], list[int]] = {}
    for position, gram in enumerate(zip(*(words[k:] for k in range(n)))):
        positions.setdefault(gram, []).append(position)
    anchors = []
    for index, tokens in enumerate(documents):
        found = sorted(
            hits[0] for gram in zip(*(tokens[k:] for k in range(n))) if len(hits := positions.get(gram, ())) == 1
        )
        anchors.append((found[len(found) // 2] if found else float("inf"), index))
    return [index for _, index in sorted(anchors)]


def segment_talks(
    xml_path: str | Path, iwslt_path: str | Path, *, min_matched_fraction: float = 0.95
) -> TalkSegmentation:
    """Cut an IWSLT split into the talks of its XML source (see the module docstring for the method)."""
    xml_path, iwslt_path = Path(xml_path), Path(iwslt_path)
    data = read_iwslt(iwslt_path, skip_empty_words=True)
    words, labels = data.words, data.labels
    if not words:
        raise TalkSegmentationError(f"{iwslt_path}: no tokens")
    documents = read_xml_documents(xml_path)
    normalised = [normalize_transcript(text)[0] for _, text in documents]
    doc_tokens = {docid: len(tokens) for (docid, _), tokens in zip(documents, normalised)}
    order = _split_order(words, normalised)
    xml_words: list[str] = []
    xml_doc: list[int] = []
    for index in order:
        xml_words.extend(normalised[index])
        xml_doc.extend([index] * len(normalised[index]))

    owner: list[int | None] = [None] * len(words)
    matcher = difflib.SequenceMatcher(None, words, xml_words, autojunk=False)
    for block in matcher.get_matching_blocks():
        for k in range(block.size):
            owner[block.a + k] = xml_doc[block.b + k]
    matched = sum(o is not None for o in owner)
    if matched < min_matched_fraction * len(words):
        raise TalkSegmentationError(
            f"{iwslt_path} vs {xml_path}: only {matched} of {len(words)} tokens match the XML documents "
            f"(< {min_matched_fraction:.0%}): not the source of this split?"
        )

    # Unmatched tokens take the talk of the previous matched token (the next one at the very start).
    filled: list[int] = []
    first_known = next(o for o in owner if o is not None)
    previous = first_known
    resolved: list[int] = []
    for index, doc in enumerate(owner):
        if doc is None:
            filled.append(index)
            doc = previous
        resolved.append(doc)
        previous = doc

    # Contiguous runs -> talks; a docid in two runs means the split and the XML disagree on the order.
    ranges: list[tuple[str, int, int]] = []
    start = 0
    for index in range(1, len(resolved) + 1):
        if index == len(resolved) or resolved[index] != resolved[start]:
            ranges.append((documents[resolved[start]][0], start, index - start))
            start = index
    ids = [r[0] for r in ranges]
    repeated = sorted({d for d in ids if ids.count(d) > 1})
    if repeated:
        raise TalkSegmentationError(
            f"{iwslt_path} vs {xml_path}: talks {repeated} occur in more than one token range "
            f"(run order: {ids[:20]}{'...' if len(ids) > 20 else ''})"
        )
    unmatched_docs = [docid for docid, _ in documents if docid not in ids]
    if unmatched_docs:
        raise TalkSegmentationError(f"{iwslt_path} vs {xml_path}: documents {unmatched_docs} match no token")

    talks = talks_from_ranges(words, labels, ranges)
    report: dict[str, Any] = {
        "iwslt": str(iwslt_path),
        "xml": str(xml_path),
        "tokens": len(words),
        "xml_tokens": len(xml_words),
        "talks": len(talks),
        "matched_tokens": matched,
        "filled_tokens": len(filled),
        "filled": [{"index": i, "word": words[i], "talk": documents[resolved[i]][0]} for i in filled],
        "per_talk": [
            {"talk": t.talk_id, "first_token": t.first_token, "tokens": t.tokens, "xml_tokens": doc_tokens[t.talk_id]}
            for t in talks
        ],
        "replaced_invalid_byte_lines": list(data.replaced_lines),
        "skipped_empty_word_lines": list(data.skipped_lines),
    }
    return TalkSegmentation(talks, report)


def test_talks(xml_path: str | Path, iwslt_path: str | Path) -> list[Talk]:
    """The talks of ``test2011``/``test2011asr`` (see :func:`segment_talks`, which also gives the report)."""
    return segment_talks(xml_path, iwslt_path).talks


test_talks.__test__ = False  # type: ignore[attr-defined]  # not a pytest test, despite its name


# --- train: ranges written by the prepare stage ---------------------------------------------------------


def train_talks(train_tsv: str | Path, train_talks_tsv: str | Path) -> list[Talk]:
    """The talks of the prepared training split from ``train_talks.tsv`` (``talk first_token tokens``)."""
    train_tsv, train_talks_tsv = Path(train_tsv), Path(train_talks_tsv)
    data = read_iwslt(train_tsv)
    lines = train_talks_tsv.read_text(encoding="utf-8").splitlines()
    if not lines or lines[0].split("\t") != ["talk", "first_token", "tokens"]:
        raise TalkSegmentationError(f"{train_talks_tsv}: expected the header 'talk<TAB>first_token<TAB>tokens'")
    ranges = []
    for number, line in enumerate(lines[1:], start=2):
        if not line.strip():
            continue
        parts = line.split("\t")
        if len(parts) != 3:
            raise TalkSegmentationError(f"{train_talks_tsv}:{number}: expected 3 columns, got {len(parts)}")
        try:
            ranges.append((parts[0], int(parts[1]), int(parts[2])))
        except ValueError as error:
            raise TalkSegmentationError(f"{train_talks_tsv}:{number}: {error}") from error
    try:
        return talks_from_ranges(data.words, data.labels, ranges)
    except ValueError as error:
        raise TalkSegmentationError(f"{train_talks_tsv} does not match {train_tsv}: {error}") from error


# --- dev2012: pseudo-talks ------------------------------------------------------------------------------


def pseudo_talks(
    words: Sequence[str], labels: Sequence[str], *, target_tokens: int = 1500, prefix: str = "dev"
) -> list[Talk]:
    """Cut a split without talk boundaries into pseudo-talks (see the module docstring)."""
    if target_tokens < 4:
        raise ValueError(f"target_tokens must be at least 4, got {target_tokens}")
    if len(words) != len(labels):
        raise ValueError(f"{len(words)} words but {len(labels)} labels")
    # Hard parts: after every /transcript tag.
    parts: list[tuple[int, int]] = []
    start = 0
    for index, word in enumerate(words):
        if _TRANSCRIPT_END.match(word):
            parts.append((start, index + 1))
            start = index + 1
    if start < len(words):
        parts.append((start, len(words)))

    cuts: list[tuple[int, int]] = []
    for part_start, part_end in parts:
        position = part_start
        part_cuts: list[tuple[int, int]] = []
        while position < part_end:
            end = min(part_end, position + target_tokens)
            while end < min(part_end, position + 2 * target_tokens) and labels[end - 1] not in SENTENCE_END_LABELS:
                end += 1
            part_cuts.append((position, end))
            position = end
        if len(part_cuts) > 1 and part_cuts[-1][1] - part_cuts[-1][0] < target_tokens / 4:
            last = part_cuts.pop()
            part_cuts[-1] = (part_cuts[-1][0], last[1])
        cuts.extend(part_cuts)
    width = max(3, len(str(len(cuts))))
    ranges = [(f"{prefix}-{n:0{width}d}", a, b - a) for n, (a, b) in enumerate(cuts)]
    return talks_from_ranges(words, labels, ranges)
