"""Word-preserving punctuation of user text (``corpus.user_text``): the mapping layer with stub predictors.

The central property: whatever the model predicts, the output holds the input's words byte for byte, in
order, with the same whitespace; only marks after words and capitals of lower-case words may differ.
"""

from __future__ import annotations

import random
import re

import pytest

from corpus.labels import LABELS
from corpus.user_text import (
    model_tokens,
    punctuate_user_text,
    render,
    split_user_text,
    word_labels,
)

MARKS = ",;:.!?\u2026\u2014\u2013"
CLOSERS = "\"'\u201d\u2019\u00bb\u203a)]}"
# Every mark in a word's trailing run of marks, dashes and closing quotes/brackets (an oracle written
# independently of the module: a regex, not its right-to-left scan).
_TRAILING_MARK = re.compile(rf"(?:[{MARKS}]|--+)(?=(?:[{MARKS}{re.escape(CLOSERS)}]|--+)*$)")


def canonical(piece: str) -> str:
    """A piece with the marks of its trailing run removed (the marks the tool may replace)."""
    return _TRAILING_MARK.sub("", piece)


def capitalised_first_letter(word: str) -> str:
    for index, char in enumerate(word):
        if char.isalpha():
            return word[:index] + char.upper() + word[index + 1 :]
    return word


def same_words(source: str, output: str, *, keep_case: bool = False) -> None:
    """Assert the output's words are the input's (modulo replaced marks and, unless keep_case, capitals)."""
    expected = [canonical(piece) for piece in source.split()]
    expected = [piece for piece in expected if piece]
    got = [canonical(piece) for piece in output.split()]
    assert len(got) == len(expected), (source, output)
    for before, after in zip(expected, got):
        if keep_case or after == before:
            assert after == before, (source, output)
        else:
            assert before[:1] != "" and after == capitalised_first_letter(before), (before, after, source, output)
            assert before == before.lower()  # only lower-case words get a capital


def one_mark_added(core: str, after: str) -> bool:
    """Whether ``after`` is ``core`` (case aside) plus at most one of , . ? (``core``: marks already removed),
    and the final period of an abbreviation (``U.S.``), which ``canonical`` removes but the tool keeps."""
    added = []
    position = 0
    for char in after:
        if position < len(core) and char.lower() == core[position].lower():
            position += 1
        else:
            added.append(char)
    if added[:1] == ["."] and len(added) == 2:
        added = added[1:]
    return position == len(core) and len(added) <= 1 and set(added) <= set(",.?")


def labels_from(rng: random.Random):
    return lambda tokens: [rng.choice(LABELS) for _ in tokens]


def constant(label: str):
    return lambda tokens: [label] * len(tokens)


# ----------------------------------------------------------------------------- the user's bug report


@pytest.mark.parametrize("label", LABELS)
@pytest.mark.parametrize(
    "text",
    [
        "I won't go",
        "you can't say that",
        "it'll rain",
        "the price is 6.8 percent",
        "see https://example.com/a/b?x=1&y=2 or write to john.doe@example.com",
        "so much fun \U0001F600 (laughs) [sic] and more",
        "Mr. smith met dr. who in the us",
        "first line\nsecond line\r\n\n  third line\n",
    ],
)
def test_words_survive_any_prediction(text, label):
    _, _, output = punctuate_user_text(text, constant(label))
    same_words(text, output)
    _, _, kept = punctuate_user_text(text, constant(label), capitalise=False)
    same_words(text, kept, keep_case=True)
    assert re.findall(r"\s+", output) == re.findall(r"\s+", text)


def test_the_reported_examples():
    assert punctuate_user_text("I won't go", constant("O"))[2] == "I won't go"
    assert punctuate_user_text("you can't stop", constant("PERIOD"))[2] == "You. Can't. Stop."
    period_after_it = lambda tokens: ["PERIOD" if t == "'ll" else "O" for t in tokens]  # noqa: E731
    assert punctuate_user_text("it'll do", period_after_it)[2] == "It'll. Do"
    assert punctuate_user_text("grew 6.8 percent", constant("O"))[2] == "Grew 6.8 percent"
    assert punctuate_user_text("Mr. smith met dr. who in the us", constant("O"))[2] == \
        "Mr. smith met dr. who in the us"
    text = "see www.example.com/a?b=1 or mail me@example.org \U0001F600 (Laughter) [sic]"
    assert punctuate_user_text(text, constant("O"), capitalise=False)[2] == text


def test_model_tokens_are_the_benchmark_tokens_of_each_word():
    user_text = split_user_text("I won't say \"can't\" about the U.S. at 6.8% -- \U0001F600 wonʼt it's")
    assert [w.tokens for w in user_text.words] == [
        ("i",), ("wo", "n't"), ("say",), ("cannot",), ("about",), ("the",), ("us",), ("at",), ("68%",), (),
        ("wo", "n't"), ("it", "'s"),
    ]
    assert model_tokens(user_text) == [t for w in user_text.words for t in w.tokens]


def test_a_word_takes_the_label_of_its_last_token():
    user_text = split_user_text("I won't \U0001F600 go")
    # tokens: i / wo n't / (none) / go
    assert word_labels(user_text, ["COMMA", "PERIOD", "QUESTION", "O"]) == ["COMMA", "QUESTION", "O", "O"]
    with pytest.raises(ValueError, match="3 labels for 4 model tokens"):
        word_labels(user_text, ["O", "O", "O"])
    with pytest.raises(ValueError, match="unknown label"):
        word_labels(user_text, ["O", "O", "BANG", "O"])


# ----------------------------------------------------------------------------- marks and their place


def only(label_of: dict[str, str]):
    return lambda tokens: [label_of.get(t, "O") for t in tokens]


@pytest.mark.parametrize(
    ("text", "labels", "expected"),
    [
        # existing marks at a word's end are replaced by the prediction
        ("hello, world! bye", {"hello": "PERIOD"}, "Hello. World bye"),
        ("really?! yes; no: maybe...", {}, "Really yes no maybe"),
        # a mark standing alone between words goes, with one of its two whitespace runs
        ("so -- well , yes ...\n", {"so": "COMMA"}, "So, well yes\n"),
        ("a ,\nb", {}, "A\nb"),
        ("a\n, b", {}, "A\nb"),
        ("  -- start here", {}, "  Start here"),
        # the predicted mark takes the place of the first replaced one: quotes and brackets stay put
        ('he said "done," then', {"done": "PERIOD"}, 'He said "done." Then'),
        ("(see above). next", {"above": "QUESTION"}, "(See above)? Next"),
        # no mark before: the new one goes at the very end
        ('he said "done" then', {"done": "PERIOD"}, 'He said "done". Then'),
        ("the parents' house", {"parents": "COMMA"}, "The parents', house"),
        # abbreviations keep their period; a predicted PERIOD adds no second one
        ("in the U.S. people", {"us": "PERIOD"}, "In the U.S. People"),
        ("in the U.S. people", {"us": "COMMA"}, "In the U.S., people"),
        ("the U.S.? yes", {}, "The U.S. yes"),
        ("Mr. Smith and Dr. Who etc. and so on", {}, "Mr. Smith and Dr. Who etc. and so on"),
        ("at 6 a.m. e.g. now", {"am": "COMMA"}, "At 6 a.m., e.g. now"),
        ("J. Smith said no.", {"no": "PERIOD"}, "J. Smith said no."),
        ("I said no. yes", {}, "I said no yes"),
        # marks inside a word are part of it
        ("6.8 $1.25 9:00 6,400 wait...what it'll e-mail", {}, "6.8 $1.25 9:00 6,400 wait...what it'll e-mail"),
        ("three- to five-year", {"three": "COMMA"}, "Three-, to five-year"),
        ("go to https://example.com/x?y=1. now", {"now": "QUESTION"}, "Go to https://example.com/x?y=1 now?"),
        ("mail john.doe@example.com!", {}, "Mail john.doe@example.com"),
        # words without model tokens are written back as given, marks included, and get no mark
        ("great (Laughter). thanks", {}, "Great (Laughter). thanks"),
        ("great \U0001F600! thanks", {"great": "PERIOD"}, "Great. \U0001F600! Thanks"),
        ("a & b # c", {}, "A & b # c"),
        ('he " said', {}, 'He " said'),
    ],
)
def test_marks(text, labels, expected):
    assert punctuate_user_text(text, only(labels))[2] == expected


# ----------------------------------------------------------------------------- capitals


@pytest.mark.parametrize(
    ("text", "labels", "expected"),
    [
        ("i think i'm right and i’ll say i've", {}, "I think I'm right and I’ll say I've"),
        ("done it's \"well\" it", {"done": "PERIOD", "s": "O", "well": "QUESTION"}, "Done. It's \"well\"? It"),
        ("iPhone eBay NASA are fine", {}, "iPhone eBay NASA are fine"),
        ("e.g. this", {}, "e.g. this"),
        ("www.example.com is up", {}, "www.example.com is up"),
        ("3d printing", {}, "3d printing"),
        ("schrödinger's cat", {}, "Schrödinger's cat"),
        ("ßtraße ok", {}, "ßtraße ok"),  # no single-letter capital: left alone
        ("\U0001F600 hello", {}, "\U0001F600 Hello"),  # the sentence starts at the first word with tokens
        ("Already Capital words STAY", {}, "Already Capital words STAY"),
    ],
)
def test_capitals(text, labels, expected):
    assert punctuate_user_text(text, only(labels))[2] == expected


def test_keep_case_changes_no_letter():
    text = "i think. so i'm here"
    assert punctuate_user_text(text, constant("PERIOD"), capitalise=False)[2] == "i. think. so. i'm. here."
    assert punctuate_user_text(text, constant("PERIOD"))[2] == "I. Think. So. I'm. Here."


# ----------------------------------------------------------------------------- whitespace


def test_whitespace_is_kept_exactly():
    text = "\n  first line\r\nsecond\t\tline  \n\n\u00a0third\n"
    _, _, output = punctuate_user_text(text, constant("O"), capitalise=False)
    assert output == text
    _, _, output = punctuate_user_text(text, constant("PERIOD"), capitalise=False)
    assert output == "\n  first. line.\r\nsecond.\t\tline.  \n\n\u00a0third.\n"


@pytest.mark.parametrize("text", ["", "   \n", "-- , ...", "\n\n"])
def test_text_without_words(text):
    user_text, labels, output = punctuate_user_text(text, constant("PERIOD"))
    assert user_text.words == () and labels == []
    assert output.strip() == ""


def test_render_validates():
    user_text = split_user_text("a b")
    with pytest.raises(ValueError, match="1 labels for 2 words"):
        render(user_text, ["O"])


# ----------------------------------------------------------------------------- the property


_PIECES = {
    "plain": ["the", "people", "world", "time", "river", "and", "so", "well", "i", "a", "it"],
    "contraction": ["won't", "can't", "don't", "it's", "i'm", "they'll", "we've", "i'd", "ain't", "o'clock",
                    "won’t", "can’t", "wonʼt", "itʼs", "y'all", "'90s", "rock'n'roll", "parents'", "'lolita'"],
    "number": ["6.8", "$1.25", "6,400", "9:00", "9/11", "20%", "3.14159", "0.5", "1,000.50", "24/7", "v1.2.3"],
    "hyphen": ["well-known", "e-mail", "three-", "-", "x-ray", "mother-in-law"],
    "abbreviation": ["U.S.", "u.s.", "a.m.", "Ph.D.", "e.g.", "i.e.", "Mr.", "dr.", "Mrs.", "etc.", "J.", "No."],
    "url": ["https://example.com/a?b=1&c=2", "www.example.org", "http://x.io/path.html", "example.com/a.b"],
    "email": ["john.doe@example.com", "a.b+c@mail.co.uk", "me@x.org"],
    "bracket": ["(Laughter)", "(see", "above)", "[sic]", "[the]", "{x}", "(a)", "401(k)"],
    "emoji": ["\U0001F600", "\U0001F44D\U0001F3FD", "\u2764\ufe0f", "\U0001F468\u200d\U0001F469\u200d\U0001F467",
              "great\U0001F600"],
    "symbol": ["&", "#", "*", "@", "+", "=", "/", "\u266a", "§3"],
    "quote": ['"hello', 'world"', "\u201cquoted\u201d", "\u2018single\u2019", "\u00abguillemets\u00bb"],
    "cased": ["NASA", "iPhone", "eBay", "The", "HELLO", "McDonald's", "I", "Über", "straße", "ÉCOLE"],
}
_TRAILING = ["", "", "", ",", ".", "?", "!", ";", ":", "...", "?!", "--", "\u2014", "\u2026", ".\"", ",\"",
             ").", "\u201d.", ".)", "'"]
_STANDALONE = ["--", ",", "...", "\u2014", "-", "?", ".", ":"]
_SPACES = [" ", " ", " ", " ", "  ", "\n", "\r\n", "\n\n", "\t", " \n ", "\u00a0"]


def random_text(rng: random.Random, *, standalone_marks: bool) -> str:
    parts = [rng.choice(["", "", " ", "\n"])]
    for _ in range(rng.randint(1, 25)):
        if standalone_marks and rng.random() < 0.08:
            piece = rng.choice(_STANDALONE)
        else:
            piece = rng.choice(_PIECES[rng.choice(list(_PIECES))]) + rng.choice(_TRAILING)
            if not standalone_marks and not canonical(piece):  # "-" + "--": a mark-only piece after all
                continue
        parts.append(piece)
        parts.append(rng.choice(_SPACES))
    if rng.random() < 0.5:
        parts.pop()
    return "".join(parts)


@pytest.mark.parametrize("seed", range(6))
def test_property_output_words_are_the_input_words(seed):
    rng = random.Random(seed)
    for _ in range(150):
        text = random_text(rng, standalone_marks=True)
        predictor = labels_from(rng)
        user_text, labels, output = punctuate_user_text(text, predictor)
        same_words(text, output)
        assert len(labels) == len(user_text.words)
        _, _, kept = punctuate_user_text(text, predictor, capitalise=False)
        same_words(text, kept, keep_case=True)
        # without stand-alone marks, not one whitespace character changes
        text = random_text(rng, standalone_marks=False)
        _, _, output = punctuate_user_text(text, predictor)
        same_words(text, output)
        assert re.split(r"\S+", output) == re.split(r"\S+", text)
        # the only character a word may gain is one predicted mark
        pieces = [(p, canonical(p)) for p in text.split()]
        for (before, core), after in zip([p for p in pieces if p[1]], output.split()):
            assert after == before or one_mark_added(core, after), (before, after, text, output)


def test_property_iwslt_words_are_the_input_words():
    rng = random.Random(42)
    for _ in range(300):
        text = random_text(rng, standalone_marks=False)
        user_text = split_user_text(text)
        assert [canonical(w.text) for w in user_text.words] == [c for c in map(canonical, text.split()) if c]
        for word in user_text.words:
            assert word.text and not re.search(r"\s", word.text)
            assert 0 <= word.mark_at <= len(word.text)


# ----------------------------------------------------------------------------- a real paragraph


PARAGRAPH = (
    "I can't believe it's already 2024 and we've still got 6.8 billion people who won't see a doctor. "
    "Don't you think that's odd? My friend's e-mail, john.doe@example.com, says the U.S. spends $3.5 "
    "trillion a year -- that's 17.9% of GDP!\n"
    "She'll tell you (and I'd agree) that it isn't about money; it's about access at 9:00 a.m. on a "
    "Monday... \U0001F914 Isn't it?\n"
)


def test_a_real_paragraph_keeps_every_word():
    # A predictor that puts a PERIOD after every "money", "doctor", "odd", "gdp" and a COMMA after "it's".
    predict = only({"doctor": "PERIOD", "odd": "QUESTION", "gdp": "PERIOD", "money": "COMMA", "'s": "COMMA"})
    user_text, labels, output = punctuate_user_text(PARAGRAPH, predict)
    assert output == (
        "I can't believe it's, already 2024 and we've still got 6.8 billion people who won't see a doctor. "
        "Don't you think that's, odd? My friend's, e-mail john.doe@example.com says the U.S. spends $3.5 "
        "trillion a year that's, 17.9% of GDP.\n"
        "She'll tell you (and I'd agree) that it isn't about money, it's, about access at 9:00 a.m. on a "
        "Monday \U0001F914 Isn't it\n"
    )
    same_words(PARAGRAPH, output)
    assert "can't" in output and "won't" in output and "6.8" in output and "17.9%" in output and "$3.5" in output
    words = [word.text for word in user_text.words]
    assert words[:5] == ["I", "can't", "believe", "it's", "already"]
    assert "won't" in words and "doctor" in words and "GDP" in words and "\U0001F914" in words
    assert len(words) == len([p for p in PARAGRAPH.split() if p != "--"])
