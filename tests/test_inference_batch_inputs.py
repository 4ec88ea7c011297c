"""The transcripts of a ``punctuate`` batch and their word times (``inference.batch_inputs``): folders read
recursively, names that mirror, outputs never taken for inputs; timings paired by name, in any of the formats,
and every transcript that cannot be paired named with the reason."""

from __future__ import annotations

import pytest

from corpus.timings import TimingsFormatError
from inference.batch_inputs import TimingsFinder, Transcript, TranscriptError, decode_text, find_transcripts


def touch(path, text: str = "so it goes\n"):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def test_folders_are_read_recursively_and_files_by_name(tmp_path):
    corpus = tmp_path / "corpus"
    for name in ("b.txt", "a/c.txt", "a/deeper/d.txt", ".hidden.txt", ".git/e.txt", "notes.md"):
        touch(corpus / name)
    touch(corpus / "out" / "old.txt")  # the output folder, inside the input folder
    single = touch(tmp_path / "elsewhere" / "talk.transcript")
    transcripts, problems = find_transcripts([corpus, single, tmp_path / "nope"], exclude=corpus / "out")
    assert [t.name for t in transcripts] == ["a/c.txt", "a/deeper/d.txt", "b.txt", "talk.transcript"]
    assert transcripts[1].path == str(corpus / "a" / "deeper" / "d.txt") and transcripts[1].stem == "a/deeper/d"
    assert problems == {str(tmp_path / "nope"): f"{tmp_path / 'nope'}: no such file or folder"}


def test_two_transcripts_of_one_name_are_both_refused(tmp_path):
    first, second = touch(tmp_path / "x" / "talk.txt"), touch(tmp_path / "y" / "talk.txt")
    transcripts, problems = find_transcripts([tmp_path / "x", tmp_path / "y"])
    assert transcripts == [] and problems["talk.txt"].startswith(f"talk.txt: several inputs of this name ({first}, "
                                                                 f"{second})")
    transcripts, problems = find_transcripts([first, tmp_path / "x"])  # the same file twice is one transcript
    assert [t.name for t in transcripts] == ["talk.txt"] and problems == {}


def test_transcripts_are_utf8_and_errors_name_the_line():
    assert decode_text("\ufeffcaf\u00e9\n".encode("utf-8"), "t.txt") == "caf\u00e9\n"
    with pytest.raises(TranscriptError, match=r"t\.txt:2: not UTF-8 text \(byte offset 6\)"):
        decode_text(b"hello\n\xe9t\xe9\n", "t.txt")


@pytest.fixture()
def times(tmp_path):
    times = tmp_path / "times"
    touch(times / "a.tsv", "so\t0.1\t0.2\n")
    touch(times / "sub" / "b.json", '[{"word": "so", "start": 0.1, "end": 0.2}]')
    touch(times / "c.ctm", "c 1 0.1 0.1 so\nc-other 1 0.1 0.1 well\n")
    touch(times / "d.ctm", "x 1 0.1 0.1 so\ny 1 0.1 0.1 well\n")
    touch(times / "e.tsv", "so\t0.1\t0.2\n")
    touch(times / "e.json", "[]")
    touch(times / "corpus" / "all.ctm", "f 1 0.1 0.1 so\ng 1 0.1 0.1 it\nh 1 0.0 0.1 well\ng 1 0.3 0.1 goes\n")
    touch(times / "more.ctm", "f2 1 0.1 0.1 so\nf 1 0.1 0.1 so\n")
    touch(times / ".hidden.ctm", "i 1 0.1 0.1 so\n")
    return times


def transcripts(*names: str) -> dict[str, Transcript]:
    return {name: Transcript(name, f"/corpus/{name}") for name in names}


def test_timings_are_paired_by_name(times):
    found = transcripts("a.txt", "sub/b.txt", "c.txt", "h.txt", "deep/f2.txt")
    finder = TimingsFinder(times, {t.stem for t in found.values()})
    assert finder.source_for(found["a.txt"]).path == str(times / "a.tsv")
    assert finder.source_for(found["sub/b.txt"]).format == "json"
    c = finder.source_for(found["c.txt"])  # its own CTM: the utterance named as it is
    assert (c.path, c.format, c.utterance.utterance) == (str(times / "c.ctm"), "ctm", "c")
    h = finder.source_for(found["h.txt"])  # the utterance of a corpus's CTM
    assert (h.path, h.utterance.utterance, h.utterance.first_line) == (str(times / "corpus" / "all.ctm"), "h", 3)
    assert h.read_bytes() == b"h 1 0.0 0.1 well\n"
    assert finder.source_for(found["deep/f2.txt"]).path == str(times / "more.ctm")


@pytest.mark.parametrize("name, message", [
    ("e.txt", r"several timings files for e\.txt: .*e\.json, .*e\.tsv \(choose one with --timings-format\)"),
    ("d.txt", r"d\.ctm: holds 2 utterances \(x, y\), none named 'd'"),
    ("f.txt", r"utterance 'f' \(for f\.txt\) is in several CTM files: .*all\.ctm, .*more\.ctm"),
    ("g.txt", r"all\.ctm:4: utterance 'g' goes on here after other utterances"),
    ("i.txt", r"no word timings for i\.txt in .*times: no i\.tsv, i\.ctm, i\.json or utterance 'i' of its other "
              r"CTM files"),
])
def test_what_cannot_be_paired_is_named(times, name, message):
    found = transcripts("a.txt", "d.txt", "e.txt", name)
    with pytest.raises(TimingsFormatError, match=message):
        TimingsFinder(times, {t.stem for t in found.values()}).source_for(found[name])


def test_a_format_given_restricts_the_files_looked_at(times):
    found = transcripts("e.txt", "h.txt")
    finder = TimingsFinder(times, {"e", "h"}, "json")
    assert finder.source_for(found["e.txt"]).path == str(times / "e.json")
    with pytest.raises(TimingsFormatError, match=r"no word timings for h\.txt in .*: no h\.json$"):
        finder.source_for(found["h.txt"])
    with pytest.raises(FileNotFoundError, match="timings folder not found"):
        TimingsFinder(times / "nope", set())
