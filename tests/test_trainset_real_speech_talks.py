"""The real-speech talks are never trained on: excluded by name, checked by text (``trainset.prepare``)."""

from __future__ import annotations

import gzip
import json

import pytest

from corpus.iwslt import read_iwslt
from tests.test_trainset_prepare import SETTINGS, _text, fake_data  # noqa: F401 - the fixture
from trainset.prepare import REASON_NAMED, REASON_OVERLAP, prepare_data


def _add_talks(ted, talks):
    with gzip.open(ted, "rt", encoding="utf-8") as handle:
        lines = handle.read().splitlines()
    with gzip.open(ted, "wt", encoding="utf-8") as handle:
        for line in lines + [json.dumps(talk) for talk in talks]:
            handle.write(line + "\n")


def test_named_talks_and_their_copies_are_excluded(tmp_path, fake_data):  # noqa: F811
    iwslt, ted = fake_data
    real_text, held_back = _text(300, 30), _text(400, 30)
    _add_talks(ted, [
        {"talk": "Real_Dev_Talk", "text": real_text},
        {"talk": "Held_Back_Talk", "text": held_back},
        {"talk": "Held_Back_Talk_Again", "text": "Thank you. " + held_back},  # a copy under another name
    ])
    # the real-speech talk as its recording's transcript has it: lower case, no marks, one word a line
    words = real_text.lower().replace(",", "").replace(".", "").replace("?", "").split()
    reference = tmp_path / "Real.ref.tsv"
    reference.write_text("".join(f"{word}\tO\n" for word in words[:150]), encoding="utf-8")
    prepared = prepare_data(iwslt, ted, tmp_path / "out", train_tokens=5000,
                            excluded_talks=["Real_Dev_Talk", "Held_Back_Talk"], real_speech={"Real": reference},
                            **SETTINGS)
    report = prepared.report
    assert report["talks"]["excluded_by_reason"][REASON_NAMED] == 2
    named = {row["talk"]: row for row in report["real_speech"]["excluded_by_name"]}
    assert set(named) == {"Real_Dev_Talk", "Held_Back_Talk"}
    assert named["Real_Dev_Talk"]["shared_fractions"]["real:Real"] > 0.2  # the name is the right talk
    assert report["real_speech"]["real_talks"]["Real"]["ngram_coverage_by_excluded_talks"] == 1.0
    assert report["real_speech"]["excluded_by_overlap_with_them"] == ["Held_Back_Talk_Again"]
    excluded = {row["talk"]: row for row in report["overlap"]["excluded_talks"]}
    assert excluded["Held_Back_Talk_Again"]["splits"] == ["talk:Held_Back_Talk"]
    rows = (tmp_path / "out" / "excluded_talks.tsv").read_text(encoding="utf-8")
    assert "Real_Dev_Talk\treal:Real\t" in rows and REASON_NAMED in rows and REASON_OVERLAP in rows
    train_talks = (tmp_path / "out" / "train_talks.tsv").read_text(encoding="utf-8")
    assert not {"Real_Dev_Talk", "Held_Back_Talk", "Held_Back_Talk_Again"} & {
        line.split("\t")[0] for line in train_talks.splitlines()}
    train = read_iwslt(prepared.paths["train"])
    assert " ".join(held_back.lower().split()[:8]) not in " ".join(train.words)
    assert report["parameters"]["excluded_talks"] == ["Real_Dev_Talk", "Held_Back_Talk"]


def test_a_name_that_is_not_in_the_file_is_an_error(tmp_path, fake_data):  # noqa: F811
    iwslt, ted = fake_data
    with pytest.raises(ValueError, match="no talk named 'Nobody_Talk'"):
        prepare_data(iwslt, ted, tmp_path / "out", train_tokens=600, excluded_talks=["Nobody_Talk"], **SETTINGS)
    with pytest.raises(ValueError, match="twice"):
        prepare_data(iwslt, ted, tmp_path / "out", train_tokens=600, excluded_talks=["A", "A"], **SETTINGS)
