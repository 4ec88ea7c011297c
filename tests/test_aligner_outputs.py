"""Alignment outputs (Parquet, TextGrid, TSV), the backend registry, the MFA backend and the CLI."""

from __future__ import annotations

import math
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from aligner import (
    AlignConfig,
    BackendUnavailable,
    WordTiming,
    align,
    backend_names,
    get_backend,
    read_alignment_table,
    write_alignment_table,
    write_textgrid,
    write_tsv,
)
from aligner.mfa_backend import MfaBackend, read_mfa_textgrid
from audio.reference_speech import flite_available

NAN = float("nan")
TIMINGS = [
    WordTiming("so", 0.1, 0.4, True),
    WordTiming("i", 0.55, 0.7, True),
    WordTiming("do", 0.7, 0.82, False),
    WordTiming("n't", NAN, NAN, False),
    WordTiming("know", 1.0, 1.3, True),
]
REPO = Path(__file__).resolve().parents[1]


def test_alignment_table_round_trip(tmp_path):
    path = write_alignment_table(TIMINGS, "talk_1", tmp_path / "out" / "align.parquet")
    table = read_alignment_table(path)
    assert list(table.columns) == ["talk", "token_index", "word", "start", "end", "aligned"]
    assert table["token_index"].tolist() == [0, 1, 2, 3, 4]
    assert table["word"].tolist() == ["so", "i", "do", "n't", "know"]
    assert set(table["talk"]) == {"talk_1"}
    assert table["aligned"].tolist() == [True, True, False, False, True]
    assert math.isnan(table["start"][3]) and table["end"][4] == pytest.approx(1.3)


def test_textgrid_has_aligned_and_unaligned_tiers(tmp_path):
    from praatio import textgrid

    path = write_textgrid(TIMINGS, tmp_path / "align.TextGrid", duration=2.0)
    grid = textgrid.openTextgrid(str(path), includeEmptyIntervals=False)
    assert list(grid.tierNames) == ["words", "unaligned"]
    words = grid.getTier("words").entries
    assert [entry.label for entry in words] == ["so", "i", "know"]
    assert words[0].start == pytest.approx(0.1) and words[-1].end == pytest.approx(1.3)
    assert [entry.label for entry in grid.getTier("unaligned").entries] == ["do"]
    assert grid.maxTimestamp == pytest.approx(2.0)


def test_tsv_leaves_unaligned_cells_empty(tmp_path):
    lines = write_tsv(TIMINGS, tmp_path / "words.tsv").read_text().splitlines()
    assert lines == ["word\tstart\tend", "so\t0.100\t0.400", "i\t0.550\t0.700", "do\t\t", "n't\t\t",
                     "know\t1.000\t1.300"]
    estimates = write_tsv(TIMINGS, tmp_path / "estimates.tsv", unaligned_times=True).read_text().splitlines()
    assert estimates[3] == "do\t0.700\t0.820" and estimates[4] == "n't\t\t"


def test_registry_knows_both_backends():
    assert {"pocketsphinx", "mfa"} <= set(backend_names())
    assert get_backend("mfa").name == "mfa"
    with pytest.raises(KeyError, match="unknown alignment backend"):
        get_backend("nope")


def _mfa_textgrid(path: Path) -> Path:
    from praatio import textgrid

    words = [(0.0, 0.2, ""), (0.2, 0.5, "so"), (0.5, 0.6, "i"), (0.6, 0.9, "don't"), (0.9, 1.2, "know"),
             (1.2, 1.3, "sil"), (1.3, 1.5, "john"), (1.5, 1.6, "'s"), (1.6, 2.0, "zorblax"),
             (2.0, 2.4, "high"), (2.4, 2.8, "functioning")]
    phones = [(0.2, 0.35, "S"), (0.35, 0.5, "OW1"), (0.5, 0.6, "AY1"), (0.6, 0.8, "D"), (0.8, 0.9, "N"),
              (0.9, 1.2, "N"), (1.3, 1.5, "JH"), (1.5, 1.6, "Z"), (1.6, 2.0, "spn"), (2.0, 2.8, "HH")]
    grid = textgrid.Textgrid()
    grid.addTier(textgrid.IntervalTier("words", [w for w in words if w[2]], 0.0, 3.0))
    grid.addTier(textgrid.IntervalTier("phones", phones, 0.0, 3.0))
    grid.save(str(path), format="long_textgrid", includeBlankSpaces=True)
    return path


def test_mfa_textgrid_is_read_back_onto_the_tokens(tmp_path):
    path = _mfa_textgrid(tmp_path / "utterance.TextGrid")
    words = ["so", "i", "do", "n't", "know", "john", "'s", "zorblax", "high-functioning", "missing"]
    timings = read_mfa_textgrid(path, words)
    assert [t.word for t in timings] == words
    assert (timings[0].start, timings[0].end, timings[0].aligned) == (0.2, 0.5, True)
    assert timings[2].start == 0.6 and timings[3].end == 0.9 and timings[2].end == timings[3].start
    assert (timings[5].end, timings[6].start, timings[6].end) == (1.5, 1.5, 1.6)  # MFA's own split
    assert timings[7].aligned is False and timings[7].start == 1.6  # spn: out-of-vocabulary
    assert (timings[8].start, timings[8].end) == (2.0, 2.8)  # MFA split the hyphenated word
    assert timings[9].aligned is False and timings[9].start == pytest.approx(2.8)  # interpolated to the end
    assert timings[9].end == pytest.approx(3.0)


def test_mfa_backend_without_the_command(tmp_path):
    backend = MfaBackend()
    config = AlignConfig(mfa_command="definitely-not-mfa")
    assert not backend.is_available(config)
    with pytest.raises(BackendUnavailable, match="definitely-not-mfa"):
        align(tmp_path / "x.wav", ["a"], backend="mfa", config=config)
    command = backend.build_command(Path("c"), Path("o"), AlignConfig())
    assert command[1:6] == ["align", "c", "english_us_arpa", "english_us_arpa", "o"]


FAKE_MFA = """#!{python}
# Stands in for `mfa align CORPUS DICTIONARY MODEL OUTPUT ...`: one 0.25 s interval per word of each .lab.
import sys
from pathlib import Path
from praatio import textgrid
assert sys.argv[1] == "align", sys.argv
corpus, output = Path(sys.argv[2]), Path(sys.argv[5])
Path(sys.argv[-1]).write_text(" ".join(sys.argv[1:]))
for lab in corpus.glob("*.lab"):
    assert (corpus / (lab.stem + ".wav")).exists()
    words = lab.read_text().split()
    grid = textgrid.Textgrid()
    entries = [(0.25 * i, 0.25 * (i + 1), word) for i, word in enumerate(words)]
    grid.addTier(textgrid.IntervalTier("words", entries, 0.0, 0.25 * len(words) + 0.5))
    output.mkdir(parents=True, exist_ok=True)
    grid.save(str(output / (lab.stem + ".TextGrid")), format="long_textgrid", includeBlankSpaces=True)
"""


def test_mfa_backend_runs_the_command_and_reads_its_textgrid(tmp_path):
    import soundfile

    fake = tmp_path / "fake-mfa"
    fake.write_text(FAKE_MFA.format(python=sys.executable))
    fake.chmod(0o755)
    audio = tmp_path / "a.wav"
    soundfile.write(str(audio), 0.1 * np.sin(np.arange(32000) / 5.0).astype(np.float32), 16000)
    log = tmp_path / "args.txt"
    config = AlignConfig(mfa_command=str(fake), mfa_args=("--clean", str(log)))
    timings = align(audio, ["i", "do", "n't", "know"], backend="mfa", config=config)
    assert [t.word for t in timings] == ["i", "do", "n't", "know"]
    assert (timings[0].start, timings[0].end) == (0.0, 0.25)
    assert timings[1].start == 0.25 and timings[2].end == 0.5 and timings[1].end == timings[2].start
    assert all(t.aligned for t in timings)
    assert "english_us_arpa english_us_arpa" in log.read_text()


@pytest.mark.skipif(shutil.which("mfa") is None, reason="the Montreal Forced Aligner (mfa) is not on PATH")
@pytest.mark.skipif(not flite_available(), reason="flite is not installed")
def test_mfa_backend_aligns_real_audio(tmp_path):  # pragma: no cover - conda installs only
    from audio.reference_speech import synthesize

    reference = synthesize("So I don't know.", tmp_path / "s.wav")
    timings = align(tmp_path / "s.wav", reference.words, backend="mfa")
    assert [t.word for t in timings] == reference.words


needs_audio = pytest.mark.skipif(not flite_available(), reason="flite is not installed (apt-get install flite)")


@needs_audio
def test_cli_writes_one_row_per_transcript_token(tmp_path):
    pytest.importorskip("pocketsphinx")
    from aligner.cli import main
    from audio.reference_speech import synthesize
    from corpus.text import tokenize_for_inference

    text = "Well, I don't know. It's 6,400 dollars!"
    synthesize(text, tmp_path / "talk.wav")
    (tmp_path / "talk.txt").write_text(text + "\n", encoding="utf-8")
    out = tmp_path / "talk.words.tsv"
    assert main([str(tmp_path / "talk.wav"), str(tmp_path / "talk.txt"), "-o", str(out),
                 "--textgrid", str(tmp_path / "talk.TextGrid"), "--table", str(tmp_path / "talk.parquet")]) == 0
    lines = out.read_text().splitlines()
    assert lines[0] == "word\tstart\tend"
    rows = [line.split("\t") for line in lines[1:]]
    assert [row[0] for row in rows] == tokenize_for_inference(text)
    for _, start, end in rows:
        assert len(start.split(".")[1]) == 3 and float(end) >= float(start)
    starts = [float(row[1]) for row in rows]
    assert starts == sorted(starts)
    assert (tmp_path / "talk.TextGrid").exists()
    assert read_alignment_table(tmp_path / "talk.parquet")["talk"].iloc[0] == "talk"


def test_cli_bad_input_exits_2(tmp_path, capsys):
    from aligner.cli import main

    (tmp_path / "t.txt").write_text("hello world", encoding="utf-8")
    (tmp_path / "blank.txt").write_text(" ... \n", encoding="utf-8")
    (tmp_path / "latin1.txt").write_bytes("caf\xe9".encode("latin-1"))
    silent = tmp_path / "silent.wav"
    import soundfile

    soundfile.write(str(silent), np.zeros(8000, dtype=np.float32), 16000)
    out = str(tmp_path / "o.tsv")
    cases = [
        ([str(tmp_path / "missing.wav"), str(tmp_path / "t.txt")], "audio file not found"),
        ([str(silent), str(tmp_path / "t.txt")], "silent"),
        ([str(silent), str(tmp_path / "nope.txt")], "transcript not found"),
        ([str(silent), str(tmp_path / "blank.txt")], "has no words"),
        ([str(silent), str(tmp_path / "latin1.txt")], "not UTF-8"),
        ([str(silent), str(tmp_path / "t.txt"), "--backend", "nope"], "unknown backend"),
    ]
    for arguments, message in cases:
        assert main([*arguments, "-o", out]) == 2
        assert message in capsys.readouterr().err
    assert not Path(out).exists()


def test_python_dash_m_aligner_runs(tmp_path):
    done = subprocess.run([sys.executable, "-m", "aligner", str(tmp_path / "missing.wav"), str(tmp_path / "t.txt"),
                           "-o", str(tmp_path / "o.tsv")], capture_output=True, text=True, cwd=REPO)
    assert done.returncode == 2 and "error:" in done.stderr
