"""Training-set preparation (``trainset.prepare``) and its stage wrapper (``pipeline.prepare``)."""

from __future__ import annotations

import gzip
import json
import random
from pathlib import Path

import pytest
import yaml

from corpus.iwslt import read_iwslt
from corpus.text import normalize_transcript
from pipeline.prepare import main as prepare_main
from trainset.prepare import PUBLISHED_TRAIN_DISTRIBUTION, TedTalksFormatError, prepare_data, read_ted_talks
from trainset.report import report_markdown

SHARED_DATA = Path(__file__).resolve().parents[1] / ".." / "shared" / "data"
IWSLT_DIR = SHARED_DATA / "iwslt2011"

VOCABULARY = (
    "time people way year day thing man world life hand part child eye woman place work week case point "
    "number group problem fact idea water story house money river tree stone light music city road bird "
    "paper window garden engine letter mountain island bridge market school table cloud forest"
).split()
SPLITS = {"dev": "dev2012", "ref": "test2011", "asr": "test2011asr"}
SETTINGS = dict(eval_splits=SPLITS, overlap_ngram=4, overlap_min_shared_fraction=0.2, seed=7)


def _text(seed: int, sentences: int) -> str:
    """Deterministic pseudo-English: capitalised sentences ending in . or ?, with some commas."""
    rng = random.Random(seed)
    out = []
    for _ in range(sentences):
        words = [rng.choice(VOCABULARY) for _ in range(rng.randint(5, 12))]
        if len(words) > 6:
            words[3] += ","
        out.append(" ".join(words).capitalize() + rng.choice(".....?"))
    return " ".join(out)


def _write_iwslt_from_text(path: Path, text: str) -> None:
    words, labels = normalize_transcript(text)
    path.write_bytes("".join(f"{w}\t{l}\r\n" for w, l in zip(words, labels)).encode())


@pytest.fixture()
def fake_data(tmp_path):
    """Three tiny eval splits and a TED file with talks that do and do not overlap them."""
    iwslt = tmp_path / "iwslt"
    iwslt.mkdir()
    dev_text, ref_text = _text(1, 30), _text(2, 20)
    _write_iwslt_from_text(iwslt / "dev2012", dev_text)
    _write_iwslt_from_text(iwslt / "test2011", ref_text)
    # The ASR split: the same talk with recognition errors (every fifth word replaced).
    ref_words, ref_labels = normalize_transcript(ref_text)
    asr_words = [w if i % 5 else "uh" for i, w in enumerate(ref_words)]
    (iwslt / "test2011asr").write_bytes(
        "".join(f"{w}\t{l}\r\n" for w, l in zip(asr_words, ref_labels)).encode() + b"\xe2\x99?la\tO\r\n"
    )
    talks = [
        {"talk": "Test_Talk_Speaker", "text": "Translator: X\nReviewer: Y\n" + ref_text.replace(". ", ".\n(Laughter)\n")},
        {"talk": "Dev_Talk_Part", "text": _text(3, 10) + " " + dev_text[: len(dev_text) // 2]},
        {"talk": "Music_Performance", "text": "\n(Music)\n\n(Applause)\n"},
        {"talk": "Two_Words", "text": "(Music) Thank you. (Applause)"},
        *({"talk": f"Fresh_Talk_{i}", "text": _text(100 + i, 25)} for i in range(8)),
        # Shares one stock phrase with the test talk: far below the threshold, kept.
        {"talk": "Quoting_Talk", "text": _text(200, 30) + " " + " ".join(ref_text.split()[:6])},
    ]
    ted = tmp_path / "ted_talks.jsonl.gz"
    with gzip.open(ted, "wt", encoding="utf-8") as handle:
        for talk in talks:
            handle.write(json.dumps(talk) + "\n")
    return iwslt, ted


def test_prepare_excludes_overlaps_and_respects_budget(tmp_path, fake_data):
    iwslt, ted = fake_data
    out = tmp_path / "prepared"
    prepared = prepare_data(iwslt, ted, out, train_tokens=600, **SETTINGS)
    report = prepared.report

    assert set(prepared.paths) == {"dev", "ref", "asr", "train", "train_talks", "excluded_talks"}
    assert all(path.is_file() for path in prepared.paths.values())
    # Eval splits are normalised copies (LF, UTF-8), token for token.
    for split, file_name in SPLITS.items():
        original, copy = read_iwslt(iwslt / file_name), read_iwslt(prepared.paths[split])
        assert (copy.words, copy.labels) == (original.words, original.labels)
        assert b"\r" not in prepared.paths[split].read_bytes()
    assert report["eval_splits"]["asr"]["replaced_invalid_byte_lines"] == 1

    # Exclusions, with the split(s) named.
    excluded = {row["talk"]: row for row in report["overlap"]["excluded_talks"]}
    assert set(excluded) == {"Test_Talk_Speaker", "Dev_Talk_Part"}
    assert excluded["Test_Talk_Speaker"]["splits"] == ["ref", "asr"]
    assert excluded["Test_Talk_Speaker"]["shared_fraction"] == 1.0
    assert excluded["Dev_Talk_Part"]["splits"] == ["dev"]
    assert 0.2 < excluded["Dev_Talk_Part"]["shared_fraction"] < 1.0
    assert report["talks"]["excluded_by_reason"] == {
        "overlaps_eval": 2, "empty_after_normalisation": 1, "too_short_to_check": 1,
    }
    assert report["overlap"]["empty_talks"] == ["Music_Performance"]
    assert report["eval_splits"]["ref"]["ngram_coverage_by_excluded_talks"] == 1.0
    assert report["eval_splits"]["dev"]["ngram_coverage_by_excluded_talks"] > 0.3
    assert 0.0 < report["eval_splits"]["ref"]["ngram_share_with_kept_talks"] < 0.05  # the quoted phrase
    assert report["overlap"]["largest_kept_fraction"] < 0.2 <= report["overlap"]["smallest_excluded_fraction"]
    rows = (out / "excluded_talks.tsv").read_text(encoding="utf-8").splitlines()
    assert rows[0] == "talk\tsplits\tshared_fraction\treason"
    assert "Test_Talk_Speaker\tref,asr\t1.0000\toverlaps_eval" in rows
    assert "Music_Performance\t\t0.0000\tempty_after_normalisation" in rows

    # Budget: whole talks, the last one cut at a sentence end.
    train = read_iwslt(prepared.paths["train"])
    assert 500 < len(train) <= 600
    assert report["tokens"]["train"] == len(train)
    assert train.labels[-1] in {"PERIOD", "QUESTION"}
    talk_rows = [line.split("\t") for line in (out / "train_talks.tsv").read_text(encoding="utf-8").splitlines()]
    assert talk_rows[0] == ["talk", "first_token", "tokens"]
    firsts = [int(row[1]) for row in talk_rows[1:]]
    counts = [int(row[2]) for row in talk_rows[1:]]
    assert firsts == [sum(counts[:i]) for i in range(len(counts))]
    assert sum(counts) == len(train)
    names = {row[0] for row in talk_rows[1:]}
    assert not names & {*excluded, "Music_Performance", "Two_Words"}
    assert report["talks"]["kept"] == len(names)
    assert report["talks"]["truncated"]["talk"] == talk_rows[-1][0]
    # Each training talk's tokens are the start of its normalised transcript.
    first_talk = next(t for t in _talks(ted) if t[0] == talk_rows[1][0])
    assert train.words[: counts[0]] == normalize_transcript(first_talk[1])[0][: counts[0]]

    assert report["label_distribution"]["published_train2012"] == PUBLISHED_TRAIN_DISTRIBUTION
    assert abs(sum(report["label_distribution"]["train"].values()) - 100) < 0.05
    assert report["parameters"]["train_tokens"] == 600
    json.dumps(report)  # serialisable

    markdown = report_markdown(report)
    assert markdown.startswith("# Data preparation report")
    assert "| Test_Talk_Speaker | ref, asr | 100.00% |" in markdown
    assert "| split | O | COMMA | PERIOD | QUESTION |" in markdown


def _talks(ted: Path) -> list[tuple[str, str]]:
    return [(talk, text) for _, talk, text in read_ted_talks(ted)]


def test_prepare_is_deterministic_and_seeded(tmp_path, fake_data):
    iwslt, ted = fake_data
    runs = [
        prepare_data(iwslt, ted, tmp_path / name, train_tokens=400, **{**SETTINGS, "seed": seed})
        for name, seed in (("a", 7), ("b", 7), ("c", 8))
    ]
    first, again, other = (run.paths["train_talks"].read_text(encoding="utf-8") for run in runs)
    assert first == again
    assert first != other


def test_budget_larger_than_corpus_takes_every_eligible_talk(tmp_path, fake_data):
    iwslt, ted = fake_data
    report = prepare_data(iwslt, ted, tmp_path / "out", train_tokens=10**6, **SETTINGS).report
    assert report["talks"]["kept"] == report["talks"]["eligible"] == 9
    assert report["talks"]["truncated"] is None


def test_malformed_json_line_is_named(tmp_path, fake_data):
    iwslt, _ = fake_data
    ted = tmp_path / "bad.jsonl.gz"
    with gzip.open(ted, "wt", encoding="utf-8") as handle:
        handle.write(json.dumps({"talk": "A", "text": "Hello there."}) + "\n")
        handle.write('{"talk": "B", "text": "unterminated\n')
    with pytest.raises(TedTalksFormatError) as caught:
        prepare_data(iwslt, ted, tmp_path / "out", train_tokens=100, **SETTINGS)
    assert str(caught.value).startswith(f"{ted}:2: malformed JSON")
    assert caught.value.line == 2


def test_missing_fields_are_named(tmp_path):
    path = tmp_path / "talks.jsonl"
    path.write_text('{"talk": "A", "text": "x"}\n\n[1, 2]\n', encoding="utf-8")
    with pytest.raises(TedTalksFormatError, match=r"talks.jsonl:3: expected a JSON object"):
        list(read_ted_talks(path))
    path.write_text('{"talk": "A"}\n', encoding="utf-8")
    with pytest.raises(TedTalksFormatError, match=r":1: talk 'A': missing string field 'text'"):
        list(read_ted_talks(path))


def test_bad_parameters(tmp_path, fake_data):
    iwslt, ted = fake_data
    with pytest.raises(ValueError, match="train_tokens"):
        prepare_data(iwslt, ted, tmp_path / "o", train_tokens=0, **SETTINGS)
    with pytest.raises(ValueError, match="clash"):
        prepare_data(iwslt, ted, tmp_path / "o", train_tokens=10, **{**SETTINGS, "eval_splits": {"train": "dev2012"}})


def test_stage_wrapper(tmp_path, fake_data, capsys):
    iwslt, ted = fake_data
    params = {
        "profile": "tiny",
        "data": {
            "iwslt_dir": str(iwslt),
            "ted_talks": str(ted),
            "eval_splits": SPLITS,
            "overlap_ngram": 4,
            "overlap_min_shared_fraction": 0.2,
            "seed": 7,
            "train_tokens": 900,
        },
        "profiles": {"tiny": {"data": {"train_tokens": 300}}, "big": {}},
    }
    params_path = tmp_path / "params.yaml"
    params_path.write_text(yaml.safe_dump(params), encoding="utf-8")
    metrics, report = tmp_path / "metrics" / "data.json", tmp_path / "reports" / "data_report.md"
    argv = ["--params", str(params_path), "--out", str(tmp_path / "prepared"), "--metrics", str(metrics)]
    assert prepare_main([*argv, "--report", str(report)]) == 0
    data = json.loads(metrics.read_text(encoding="utf-8"))
    assert data["parameters"]["train_tokens"] == 300
    assert data["tokens"]["train"] <= 300
    assert report.read_text(encoding="utf-8").startswith("# Data preparation report")
    assert (tmp_path / "prepared" / "train.tsv").is_file()
    out = capsys.readouterr().out
    assert "tokens: train" in out and "excluded" in out


@pytest.mark.skipif(not IWSLT_DIR.is_dir(), reason=f"shared data not found at {IWSLT_DIR}")
def test_real_eval_splits_catch_a_test_talk(tmp_path):
    """Against the real benchmark: a test2011 talk as TED publishes it is excluded, fresh text is kept."""
    ted = tmp_path / "talks.jsonl.gz"
    test_talk = (
        "I'm a savant, or more precisely, a high-functioning autistic savant. It's a rare condition. "
        "And rarer still when accompanied, as in my case, by self-awareness and a mastery of language. "
        "Very often when I meet someone and they learn this about me, there's a certain kind of awkwardness. "
        "I can see it in their eyes. They want to ask me something."
    )
    with gzip.open(ted, "wt", encoding="utf-8") as handle:
        handle.write(json.dumps({"talk": "Daniel_Tammet_excerpt", "text": test_talk}) + "\n")
        handle.write(json.dumps({"talk": "Fresh", "text": _text(5, 40)}) + "\n")
    report = prepare_data(
        IWSLT_DIR, ted, tmp_path / "out", eval_splits=SPLITS, train_tokens=10_000, overlap_ngram=8,
        overlap_min_shared_fraction=0.02, seed=1,
    ).report
    excluded = {row["talk"]: row for row in report["overlap"]["excluded_talks"]}
    assert list(excluded) == ["Daniel_Tammet_excerpt"]
    assert excluded["Daniel_Tammet_excerpt"]["splits"] == ["ref", "asr"]
    assert excluded["Daniel_Tammet_excerpt"]["shared_fraction"] > 0.9
    assert report["tokens"] == {"train": report["tokens"]["train"], "dev": 295_790, "ref": 12_626, "asr": 12_822}
    assert report["talks"]["kept"] == 1
