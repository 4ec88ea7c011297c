"""Reading and writing the benchmark's ``word<TAB>LABEL`` files (``corpus.iwslt``)."""

from __future__ import annotations

from pathlib import Path

import pytest

from corpus.iwslt import IwsltFormatError, LabelledTokens, read_iwslt, write_iwslt

SHARED_DATA = Path(__file__).resolve().parents[1] / ".." / "shared" / "data"
IWSLT_DIR = SHARED_DATA / "iwslt2011"
needs_shared_data = pytest.mark.skipif(not IWSLT_DIR.is_dir(), reason=f"shared data not found at {IWSLT_DIR}")


def _write_bytes(tmp_path: Path, data: bytes, name: str = "split") -> Path:
    path = tmp_path / name
    path.write_bytes(data)
    return path


def test_reads_crlf_and_lf_alike(tmp_path):
    body = "i\tO\n'm\tO\nhere\tPERIOD\nwhy\tQUESTION\n"
    lf = read_iwslt(_write_bytes(tmp_path, body.encode(), "lf"))
    crlf = read_iwslt(_write_bytes(tmp_path, body.replace("\n", "\r\n").encode(), "crlf"))
    assert lf.words == crlf.words == ["i", "'m", "here", "why"]
    assert lf.labels == crlf.labels == ["O", "O", "PERIOD", "QUESTION"]
    assert len(crlf) == 4
    assert crlf.replaced_lines == ()
    assert crlf.path == str(tmp_path / "crlf")


def test_invalid_utf8_is_replaced_and_counted(tmp_path):
    data = b"so\tO\r\n\xe2\x99?gimme\tO\r\nmy\tO\r\n\xe2\x99?\xe2\x99?data\tPERIOD\r\n"
    tokens = read_iwslt(_write_bytes(tmp_path, data))
    assert tokens.replaced_lines == (2, 4)
    assert tokens.words[1] == "\ufffd?gimme"
    assert tokens.words[3].endswith("data") and "\ufffd" in tokens.words[3]
    assert tokens.labels == ["O", "O", "O", "PERIOD"]


def test_blank_lines_and_trailing_newline_are_skipped(tmp_path):
    tokens = read_iwslt(_write_bytes(tmp_path, b"a\tO\r\n\r\n   \r\nb\tCOMMA\r\n\r\n"))
    assert tokens.words == ["a", "b"]
    assert tokens.labels == ["O", "COMMA"]


@pytest.mark.parametrize(
    ("body", "line", "needle"),
    [
        (b"a\tO\nmissing-tab PERIOD\nc\tO\n", 2, "no tab"),
        (b"a\tO\nb\tO\nc\tO\tCOMMA\n", 3, "2 tabs"),
        (b"a\tO\n\tCOMMA\n", 2, "empty word"),
        (b"a\tO\n   \tCOMMA\n", 2, "empty word"),
        (b"a\tO\nb\tO\nc\tEXCLAMATION\n", 3, "'EXCLAMATION'"),
        (b"a\tO\r\nb\tperiod\r\n", 2, "'period'"),
    ],
    ids=["missing-tab", "too-many-tabs", "empty-word", "whitespace-word", "unknown-label", "lower-case-label"],
)
def test_format_errors_name_file_and_line(tmp_path, body, line, needle):
    path = _write_bytes(tmp_path, body, "broken")
    with pytest.raises(IwsltFormatError) as caught:
        read_iwslt(path)
    error = caught.value
    assert error.path == str(path)
    assert error.line == line
    assert needle in error.reason
    assert str(error) == f"{path}:{line}: {error.reason}"
    assert isinstance(error, ValueError)


def test_empty_words_can_be_skipped(tmp_path):
    path = _write_bytes(tmp_path, b"diver\tO\r\n1\tO\r\n\tCOMMA\r\nwhat\tQUESTION\r\n")
    tokens = read_iwslt(path, skip_empty_words=True)
    assert tokens.words == ["diver", "1", "what"]
    assert tokens.skipped_lines == (3,)


def test_round_trip(tmp_path):
    words = ["i", "'m", "here", "schrödinger", "\ufffd?gimme", "why"]
    labels = ["O", "O", "COMMA", "PERIOD", "O", "QUESTION"]
    path = write_iwslt(tmp_path / "nested" / "dir" / "out.tsv", words, labels)
    assert path == tmp_path / "nested" / "dir" / "out.tsv"
    raw = path.read_bytes()
    assert b"\r" not in raw
    assert raw.decode("utf-8").splitlines()[3] == "schrödinger\tPERIOD"
    back = read_iwslt(path)
    assert back == LabelledTokens(words, labels, str(path), ())


def test_write_validates(tmp_path):
    with pytest.raises(ValueError, match="2 words but 1 labels"):
        write_iwslt(tmp_path / "x.tsv", ["a", "b"], ["O"])
    with pytest.raises(ValueError, match="unknown label 'BANG'"):
        write_iwslt(tmp_path / "x.tsv", ["a", "b"], ["O", "BANG"])
    with pytest.raises(ValueError, match="tab"):
        write_iwslt(tmp_path / "x.tsv", ["a\tb"], ["O"])
    assert not (tmp_path / "x.tsv").exists()


@needs_shared_data
def test_real_benchmark_files():
    ref = read_iwslt(IWSLT_DIR / "test2011")
    asr = read_iwslt(IWSLT_DIR / "test2011asr")
    assert (len(ref), len(asr)) == (12626, 12822)
    assert ref.replaced_lines == (6973, 6977, 6986, 6997)
    assert asr.replaced_lines == ()
    # dev2012 as distributed has ten empty words: an error unless asked to skip them.
    with pytest.raises(IwsltFormatError) as caught:
        read_iwslt(IWSLT_DIR / "dev2012")
    assert caught.value.line == 69615 and "dev2012" in str(caught.value)
    dev = read_iwslt(IWSLT_DIR / "dev2012", skip_empty_words=True)
    assert len(dev) == 295800 - 10
    assert len(dev.skipped_lines) == 10
    assert len(dev.replaced_lines) == 371
