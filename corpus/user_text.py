"""Punctuating a user's own text without changing a single one of its words.

:mod:`corpus.text` turns text into the benchmark's tokens (lower-cased, ``won't`` -> ``wo n't``, ``can't`` ->
``cannot``, ``6.8`` -> ``68``, brackets and symbols dropped). Those tokens are what a model reads, but they are
not what a user wrote, so the ``punctuate`` command never writes them back. This module keeps two views of
the text apart:

* the **user words**: the text split at whitespace, each word kept byte for byte with its case, and the
  exact whitespace between the words (line breaks included) kept for writing back;
* the **model tokens** of each user word: :func:`corpus.text.tokenize_for_inference` of that word alone
  (``won't`` -> ``wo`` ``n't``, ``U.S.`` -> ``us``, ``6.8`` -> ``68``), used only as the model's input.

The mark predicted after a user word is the label of the word's **last** model token (``won't`` gets the
label of ``n't``). A tool built on this module may add marks after words and capitalise; nothing else.

Marks that are replaced
-----------------------
Punctuation that already stands at a word's end is the kind of thing the model predicts, so it is removed
and the prediction takes its place. The *replaceable marks* are ``, ; : . ! ? …``, the dashes ``—`` ``–``
and a run of two or more hyphens (``--``). For every whitespace-separated piece of text:

1. Its **tail** is the longest ending made only of replaceable marks and closing quotes or brackets
   (``" ' ” ’ » › ) ] }``). The marks of the tail are removed, its quotes and brackets are kept in order.
   Everything before the tail is part of the word: marks *inside* a word stay (``6.8``, ``it'll``, ``e-mail``,
   ``john.doe@example.com``, ``https://example.com/a?b=c``, ``wait...what``), so do a single trailing hyphen
   (``three-`` in ``three- to five-year``) and anything at the word's start (``...and``, ``(see``).
2. **Abbreviations keep their final period**: letter abbreviations (``U.S.``, ``a.m.``, ``e.g.``, ``Ph.D.``),
   the titles and abbreviations of :mod:`corpus.text` (``Mr. Dr. Mrs. Ms. St. Mt. Prof. ... etc. Jr. Inc. vs.``)
   and a capital initial (``J.``; not ``I.`` and ``A.``, which are words). The period is part of the word;
   when the model predicts PERIOD there, no second period is added (``U.S.`` stays ``U.S.`` and ends the
   sentence), COMMA and QUESTION follow it (``U.S.,``). ``No.`` is not kept (``I said no.``).
3. The **predicted mark** takes the place of the first removed mark, so the user's quoting style survives:
   ``"Hello,"`` -> ``"Hello."``, ``(see above).`` -> ``(see above)?``. A word that had no mark gets the new one
   at its very end, after any closing quote or bracket: ``"done"`` -> ``"done".``.
4. A piece made only of replaceable marks (``--``, ``,``, ``...`` standing between words) is removed with
   one of the two whitespace runs around it (the one holding a line break, else the later one; at the
   start of the text the earlier one), and the prediction for the word before it replaces it.
5. A word with **no model tokens** -- an emoji, a symbol (``&``, ``#``, ``-``), a stage note in brackets
   (``(Laughter)``), a piece made of quotes and brackets only -- is written back exactly as given, marks
   included; it gets no prediction (label O) and does not count as a sentence start.

Capitals
--------
With ``capitalise=True`` (the default) the first word of the text and the first word after a predicted
PERIOD or QUESTION are capitalised, and so is the pronoun ``i`` (also ``i'm``, ``i'll``, ``i'd``, ``i've``)
anywhere. Only a word written entirely in lower case (letters, apostrophes and hyphens after any opening
quote or bracket) is changed, and only its first letter: ``it's`` -> ``It's``, ``"well`` -> ``"Well``,
``schrödinger's`` -> ``Schrödinger's``; words that already carry a capital (``iPhone``, ``eBay``, ``NASA``) or
are not plain words (``e.g.``, ``www.example.com``, ``3d``, ``great😀``) are never touched. Existing capitals
are never lowered. ``capitalise=False`` keeps every word's case as given.

Words in the benchmark format
-----------------------------
:attr:`UserWord.text` is the word as the user gave it minus its replaced marks (the whole piece for a word
with no model tokens); ``punctuate --format iwslt`` writes one ``text<TAB>LABEL`` line per user word:
``won't`` is one line ``won't<TAB>O``, not the benchmark's ``wo``/``n't``.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from corpus.labels import LABEL_TO_ID, MARK_OF_LABEL, NO_MARK, SENTENCE_END_LABELS
from corpus.text import SPLIT_SUFFIXES, tokenize_for_inference

__all__ = [
    "REPLACEABLE_MARKS",
    "CLOSERS",
    "UserWord",
    "UserText",
    "split_user_text",
    "model_tokens",
    "word_labels",
    "render",
    "punctuate_user_text",
]

#: Single characters removed from a word's tail (a run of two or more hyphens is removed too).
REPLACEABLE_MARKS = frozenset(",;:.!?\u2026\u2014\u2013")
#: Closing quotes and brackets: kept in a word's tail, in their order.
CLOSERS = frozenset("\"'\u201d\u2019\u00bb\u203a)]}")
_OPENERS = "\"'\u201c\u2018\u201e\u00ab\u2039([{\u00bf\u00a1"
_APOSTROPHES = "'\u2019\u02bc"

_WHITESPACE = re.compile(r"\s+")
_LETTER_ABBREVIATION = re.compile(r"(?:[^\W\d_]{1,2}\.){2,}")  # U.S.  a.m.  e.g.  Ph.D.
# The titles and abbreviations whose period corpus.text does not read as a mark (or only before a capital).
_ABBREVIATIONS = frozenset(
    "mr dr mrs ms st mt prof gen lt sgt capt col rev messrs etc jr sr inc ltd vs".split()
)
_PRONOUN_I = re.compile(rf"i(?:[{_APOSTROPHES}](?:m|ll|d|ve))?")
_MODEL_FORM = str.maketrans({"\u02bc": "'"})  # the modifier-letter apostrophe reads as one for the model


@dataclass(frozen=True)
class UserWord:
    """One user word: what is written back, where a predicted mark goes and what the model reads."""

    #: The word as given, minus the replaced marks of its tail (the whole piece when ``tokens`` is empty).
    text: str
    #: Index in ``text`` where a predicted mark is inserted.
    mark_at: int
    #: The model tokens of the word (benchmark tokenisation); empty: the word gets no prediction.
    tokens: tuple[str, ...]

    @property
    def predicted(self) -> bool:
        """Whether the word gets a predicted mark (it has model tokens)."""
        return bool(self.tokens)


@dataclass(frozen=True)
class UserText:
    """A text split into user words; ``spaces[i]`` is the whitespace before ``words[i]``, ``spaces[-1]`` the
    whitespace after the last word (so ``len(spaces) == len(words) + 1``)."""

    words: tuple[UserWord, ...]
    spaces: tuple[str, ...]


def _split_tail(piece: str) -> tuple[str, str]:
    """``(core, tail)``: the tail is the longest ending of replaceable marks, ``--`` runs and closers."""
    end = len(piece)
    while end > 0:
        char = piece[end - 1]
        if char in REPLACEABLE_MARKS or char in CLOSERS:
            end -= 1
        elif char == "-":
            start = end
            while start > 0 and piece[start - 1] == "-":
                start -= 1
            if end - start < 2:
                break
            end = start
        else:
            break
    return piece[:end], piece[end:]


def _keeps_final_period(word: str) -> bool:
    """Whether ``word`` (ending in '.') is an abbreviation whose period belongs to it (rule 2)."""
    body = word.lstrip(_OPENERS)
    if _LETTER_ABBREVIATION.fullmatch(body):
        return True
    stem = body[:-1]
    if stem.lower() in _ABBREVIATIONS:
        return True
    return len(stem) == 1 and stem.isalpha() and stem.isupper() and stem not in "IA"


_TOKEN_CACHE: dict[str, tuple[str, ...]] = {}


_APOSTROPHE_FORMS = str.maketrans({"\u02bc": "'", "\u2019": "'", "\u2018": "'"})
#: A clitic written as a word of its own, as in text already in the benchmark's tokenisation (``it 's``) or an
#: ASR system's output: the benchmark token it stands for (the tokeniser alone would read ``'s`` as a quote
#: and ``s``).
_STANDALONE_CLITICS = {suffix: (suffix,) for suffix in (*SPLIT_SUFFIXES, "n't")}


def _tokens_of(word: str) -> tuple[str, ...]:
    tokens = _TOKEN_CACHE.get(word)
    if tokens is None:
        tokens = _STANDALONE_CLITICS.get(word.translate(_APOSTROPHE_FORMS).lower()) \
            or tuple(tokenize_for_inference(word.translate(_MODEL_FORM)))
        if len(_TOKEN_CACHE) < 100_000:
            _TOKEN_CACHE[word] = tokens
    return tokens


def _user_word(piece: str) -> UserWord | None:
    """The user word of one whitespace-free piece, or None for a piece made only of replaceable marks."""
    core, tail = _split_tail(piece)
    if tail.startswith(".") and core and _keeps_final_period(core + "."):
        core, tail = core + ".", tail[1:]
    closers = "".join(char for char in tail if char in CLOSERS)
    if not core:
        return None if not closers else UserWord(piece, len(piece), ())
    text = core + closers
    tokens = _tokens_of(text)
    if not tokens:
        return UserWord(piece, len(piece), ())
    if len(closers) == len(tail):  # no mark removed: a new one goes at the very end
        mark_at = len(text)
    else:
        first_mark = next(i for i, char in enumerate(tail) if char not in CLOSERS)
        mark_at = len(core) + sum(1 for char in tail[:first_mark] if char in CLOSERS)
    return UserWord(text, mark_at, tokens)


def split_user_text(text: str) -> UserText:
    """Split ``text`` into user words and the whitespace around them (module docstring, rules 1-5)."""
    pieces = _WHITESPACE.split(text)
    separators = _WHITESPACE.findall(text)
    # pieces[0] and pieces[-1] are '' when the text starts / ends with whitespace
    spaces: list[str] = []
    words: list[UserWord] = []
    pending = ""  # whitespace before the next word
    started = False
    for index, piece in enumerate(pieces):
        after = separators[index] if index < len(separators) else ""
        if not piece:
            pending += after
            continue
        word = _user_word(piece)
        if word is None:  # a piece of marks only: keep one of the whitespace runs around it (rule 4)
            if not started:
                continue  # the leading whitespace stays; the run after the marks goes
            if "\n" in pending and "\n" not in after:
                continue
            pending = after
            continue
        spaces.append(pending)
        words.append(word)
        started = True
        pending = after
    spaces.append(pending)
    return UserText(tuple(words), tuple(spaces))


def model_tokens(user_text: UserText) -> list[str]:
    """The model's input: the model tokens of every user word, in order."""
    return [token for word in user_text.words for token in word.tokens]


def word_labels(user_text: UserText, token_labels: Sequence[str]) -> list[str]:
    """One label per user word: the label of its last model token (O for a word without tokens)."""
    expected = sum(len(word.tokens) for word in user_text.words)
    if len(token_labels) != expected:
        raise ValueError(f"{len(token_labels)} labels for {expected} model tokens")
    labels: list[str] = []
    position = 0
    for word in user_text.words:
        position += len(word.tokens)
        label = token_labels[position - 1] if word.tokens else NO_MARK
        if label not in LABEL_TO_ID:
            raise ValueError(f"unknown label {label!r} for the word {word.text!r}")
        labels.append(label)
    return labels


def _is_plain_lower(body: str) -> bool:
    return (
        bool(body)
        and body[0].isalpha()
        and body[0].islower()
        and len(body[0].upper()) == 1
        and all((char.isalpha() and char.islower()) or char in _APOSTROPHES or char == "-" for char in body)
    )


def _capitalised(word: UserWord, sentence_start: bool) -> str:
    """``word.text`` with its first letter capitalised when the capitals rules ask for it."""
    text = word.text
    start = len(text) - len(text.lstrip(_OPENERS))
    end = word.mark_at
    while end > start and text[end - 1] in CLOSERS:
        end -= 1
    body = text[start:end]
    if not _is_plain_lower(body):
        return text
    if sentence_start or _PRONOUN_I.fullmatch(body):
        return text[:start] + body[0].upper() + text[start + 1 :]
    return text


def render(user_text: UserText, labels: Sequence[str], *, capitalise: bool = True) -> str:
    """The text with each word's predicted mark inserted, whitespace as given, capitals per the rules."""
    if len(labels) != len(user_text.words):
        raise ValueError(f"{len(labels)} labels for {len(user_text.words)} words")
    out = [user_text.spaces[0]]
    sentence_start = True
    for word, label, space in zip(user_text.words, labels, user_text.spaces[1:]):
        if not word.predicted:
            out.append(word.text)
        else:
            text = _capitalised(word, sentence_start) if capitalise else word.text
            mark = MARK_OF_LABEL[label]
            if mark == "." and text[: word.mark_at].endswith("."):
                mark = ""  # an abbreviation's own period ends the sentence
            out.append(text[: word.mark_at] + mark + text[word.mark_at :])
            sentence_start = label in SENTENCE_END_LABELS
        out.append(space)
    return "".join(out)


def punctuate_user_text(
    text: str, predict: Callable[[list[str]], Sequence[str]], *, capitalise: bool = True
) -> tuple[UserText, list[str], str]:
    """Split ``text``, label its model tokens with ``predict`` (one label per token) and render it.

    Returns ``(user_text, word_labels, rendered_text)``.
    """
    user_text = split_user_text(text)
    tokens = model_tokens(user_text)
    token_labels = list(predict(tokens)) if tokens else []
    labels = word_labels(user_text, token_labels)
    return user_text, labels, render(user_text, labels, capitalise=capitalise)
