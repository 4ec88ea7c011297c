"""The ``punctuate`` command: words kept byte for byte, output checked before the work, atomic, fast start."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from inference import cli
from tests.fixture_corpus import TINY_MODEL, TINY_TRAIN, write_feature_cache
from tests.helpers import imported_after
from tests.test_corpus_user_text import PARAGRAPH, canonical, capitalised_first_letter, same_words

REPO = Path(__file__).resolve().parents[1]
HEAVY = ("matplotlib", "pandas", "transformers", "gensim")

BUG_REPORT = (
    "I won't go and you can't stop it, it'll be 6.8 percent.\n"
    "See https://example.com/a?b=1 or write to john.doe@example.com \U0001F600 (Laughter) [sic]\n"
    "Mr. smith met dr. who in the us\r\n"
)


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory):
    """A tiny trained model (a few steps: its marks are arbitrary, which is all these tests need)."""
    from training import train_model

    root = tmp_path_factory.mktemp("punctuate")
    features = write_feature_cache(root, talks=8, sentences_per_talk=10, train_tokens=800)
    train_model(features, root / "model", root / "state", model_config=TINY_MODEL,
                train_config={**TINY_TRAIN, "max_steps": 2, "eval_every_steps": 2, "dev_eval_tokens": 60},
                window=30, stride=15)
    return root / "model"


def run(*args: str, stdin: bytes = b"") -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "inference.cli", *args], cwd=REPO, input=stdin,
                          capture_output=True, timeout=300)


# ----------------------------------------------------------------------------- words


def test_every_word_comes_back(model_dir, tmp_path):
    source = tmp_path / "in.txt"
    source.write_bytes((BUG_REPORT + PARAGRAPH).encode("utf-8"))
    assert cli.main(["--model", str(model_dir), str(source), "-o", str(tmp_path / "out.txt")]) == 0
    output = (tmp_path / "out.txt").read_bytes().decode("utf-8")
    same_words(BUG_REPORT + PARAGRAPH, output)
    for word in ("won't", "can't", "it'll", "6.8", "https://example.com/a?b=1", "john.doe@example.com",
                 "\U0001F600", "(Laughter)", "[sic]", "Mr.", "17.9%", "$3.5", "\n"):
        assert word in output or capitalised_first_letter(word) in output, word
    assert "\r\n" in output  # line ends as given


def test_keep_case(model_dir, tmp_path):
    source = tmp_path / "in.txt"
    source.write_text("i think so. the U.S. and i'm sure\n", encoding="utf-8")
    assert cli.main(["--model", str(model_dir), str(source), "--keep-case", "-o", str(tmp_path / "a.txt")]) == 0
    same_words(source.read_text(), (tmp_path / "a.txt").read_text(), keep_case=True)
    assert cli.main(["--model", str(model_dir), str(source), "-o", str(tmp_path / "b.txt")]) == 0
    capitalised = (tmp_path / "b.txt").read_text()
    assert capitalised.startswith("I ") and " I'm" in capitalised and "i'm" not in capitalised


def test_iwslt_format_writes_the_words_as_given(model_dir, tmp_path):
    source = tmp_path / "in.txt"
    text = "Well, I won't say \"can't\" -- it's 6.8 \U0001F600 in the U.S.!\n"
    source.write_text(text, encoding="utf-8")
    out = tmp_path / "out.tsv"
    assert cli.main(["--model", str(model_dir), str(source), "--format", "iwslt", "-o", str(out)]) == 0
    rows = [line.split("\t") for line in out.read_text(encoding="utf-8").splitlines()]
    assert [word for word, _ in rows] == ["Well", "I", "won't", "say", '"can\'t"', "it's", "6.8", "\U0001F600",
                                          "in", "the", "U.S."]
    assert all(label in {"O", "COMMA", "PERIOD", "QUESTION"} for _, label in rows)
    assert dict(rows)["\U0001F600"] == "O"


def test_standard_output_is_the_exact_text(model_dir):
    text = "first line\r\n\n  second\tline \u00e9t\u00e9 \U0001F600"
    result = run("--model", str(model_dir), "--keep-case", stdin=text.encode("utf-8"))
    assert result.returncode == 0, result.stderr.decode()
    output = result.stdout.decode("utf-8")
    same_words(text, output, keep_case=True)
    assert [piece for piece in output.split() if canonical(piece)] and output.count("\r\n") == 1
    assert output.endswith("\U0001F600")  # no line end added, none taken away


# ----------------------------------------------------------------------------- the output file


@pytest.fixture
def no_model(monkeypatch):
    """Fail the test if the model is loaded."""
    import inference.punctuator

    def refuse(*args, **kwargs):
        raise AssertionError("the model was loaded before the output was checked")

    monkeypatch.setattr(inference.punctuator, "Punctuator", refuse)


def test_unwritable_folder_is_found_before_the_model_is_loaded(tmp_path, monkeypatch, capsys, no_model):
    source = tmp_path / "in.txt"
    source.write_text("hello world", encoding="utf-8")
    target = tmp_path / "locked" / "out.txt"
    target.parent.mkdir()

    def mkstemp(*args, **kwargs):
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr(cli.tempfile, "mkstemp", mkstemp)
    assert cli.main(["--model", str(tmp_path), str(source), "-o", str(target)]) == 2
    error = capsys.readouterr().err
    assert str(target) in error and "not writable" in error and str(target.parent) in error


@pytest.mark.skipif(os.name != "posix" or os.geteuid() == 0, reason="root writes into read-only folders")
def test_read_only_folder(tmp_path, capsys, no_model):
    source = tmp_path / "in.txt"
    source.write_text("hello world", encoding="utf-8")
    folder = tmp_path / "ro"
    folder.mkdir()
    folder.chmod(0o555)
    try:
        assert cli.main(["--model", str(tmp_path), str(source), "-o", str(folder / "out.txt")]) == 2
    finally:
        folder.chmod(0o755)
    assert str(folder / "out.txt") in capsys.readouterr().err


def test_output_below_a_file_or_onto_a_folder(tmp_path, capsys, no_model):
    source = tmp_path / "in.txt"
    source.write_text("hello world", encoding="utf-8")
    assert cli.main(["--model", str(tmp_path), str(source), "-o", str(source / "out.txt")]) == 2
    assert f"{source / 'out.txt'}" in capsys.readouterr().err
    assert cli.main(["--model", str(tmp_path), str(source), "-o", str(tmp_path)]) == 2
    assert "is a directory" in capsys.readouterr().err


def test_missing_output_folders_are_created_and_no_temporary_file_is_left(model_dir, tmp_path):
    source = tmp_path / "in.txt"
    source.write_text("hello world", encoding="utf-8")
    target = tmp_path / "new" / "deeper" / "out.txt"
    assert cli.main(["--model", str(model_dir), str(source), "-o", str(target)]) == 0
    assert target.read_text(encoding="utf-8").lower().replace(".", "").replace(",", "").replace("?", "") \
        == "hello world"
    assert sorted(p.name for p in target.parent.iterdir()) == ["out.txt"]


def test_bad_model_with_a_good_output_leaves_no_file(tmp_path, capsys):
    source = tmp_path / "in.txt"
    source.write_text("hello world", encoding="utf-8")
    target = tmp_path / "out.txt"
    assert cli.main(["--model", str(tmp_path / "nothing"), str(source), "-o", str(target)]) == 2
    assert "config.json" in capsys.readouterr().err
    assert not target.exists() and sorted(p.name for p in tmp_path.iterdir()) == ["in.txt"]


def test_concurrent_writers_of_one_output_do_not_collide(tmp_path):
    """Two runs writing the same -o: each writes its own temporary file; the result is one of them, whole."""
    target = tmp_path / "out.txt"
    contents = [f"writer {i} " * 20000 for i in range(8)]
    errors: list[BaseException] = []

    def write(content: str) -> None:
        try:
            for _ in range(5):
                cli.write_output(str(target), content)
        except BaseException as error:  # noqa: BLE001 - reported below
            errors.append(error)

    threads = [threading.Thread(target=write, args=(content,)) for content in contents]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    assert target.read_text(encoding="utf-8") in contents
    assert [p.name for p in tmp_path.iterdir()] == ["out.txt"]


# ----------------------------------------------------------------------------- input errors


def test_bad_input_is_reported_before_the_model_is_loaded(tmp_path, capsys, no_model):
    assert cli.main(["--model", str(tmp_path), str(tmp_path / "nope.txt")]) == 2
    assert "nope.txt: no such file" in capsys.readouterr().err
    binary = tmp_path / "binary.txt"
    binary.write_bytes(b"hello\nworld \xff there")
    assert cli.main(["--model", str(tmp_path), str(binary)]) == 2
    assert "binary.txt:2: not UTF-8" in capsys.readouterr().err


# ----------------------------------------------------------------------------- fast start


def _imported_after(statement: str) -> list[str]:
    return imported_after(statement, ("torch", *HEAVY))


def test_the_command_module_imports_nothing_heavy():
    assert _imported_after("import inference.cli") == []


def test_help_does_not_load_torch():
    result = subprocess.run([sys.executable, "-c", "import sys; from inference.cli import main\n"
                             "try:\n    main(['--help'])\nexcept SystemExit:\n    pass\n"
                             "print('TORCH' if 'torch' in sys.modules else 'LIGHT')"],
                            cwd=REPO, capture_output=True, text=True, timeout=300)
    assert result.stdout.rstrip().endswith("LIGHT") and "--keep-case" in result.stdout


def test_inference_imports_no_plotting_dataframes_or_hub_libraries():
    assert _imported_after("import inference.punctuator") == ["torch"]


@pytest.mark.skipif(__import__("torch").cuda.is_available(), reason="this machine has a GPU")
def test_a_missing_gpu_is_named_not_reported_as_a_damaged_model(model_dir, tmp_path, capsys):
    (tmp_path / "in.txt").write_text("hello world")
    assert cli.main(["--model", str(model_dir), "--device", "cuda", str(tmp_path / "in.txt")]) == 2
    error = capsys.readouterr().err
    assert "device 'cuda' requested" in error and "use device cpu or auto" in error
    assert "truncated" not in error and "damaged" not in error


def test_pretokenised_text_keeps_its_clitics_as_the_benchmark_tokens(model_dir):
    """Text already in the benchmark's tokenisation (`it 's`) reads as the benchmark's tokens, so punctuate on a
    test set's words reads what the evaluate stage reads."""
    from corpus.user_text import model_tokens, split_user_text

    assert model_tokens(split_user_text("it 's we 're i 'm they 'll do n't it ’s")) == [
        "it", "'s", "we", "'re", "i", "'m", "they", "'ll", "do", "n't", "it", "'s"]


# ----------------------------------------------------------------------------- where it runs


def test_threads_are_fixed_and_recorded_with_the_numerics(model_dir, tmp_path, capsys):
    """torch's threads are --threads (default 2), whatever the machine; a corpus's report records them and the
    numeric environment."""
    import json

    import torch

    from experiments.numerics import numeric_facts

    assert cli.build_parser().parse_args([]).threads == cli.THREADS == 2
    assert cli.build_parser().parse_args([]).device == "cpu"  # a GPU only when asked
    with pytest.raises(SystemExit):
        cli.main(["--threads", "0", "x.txt"])
    assert "--threads must be at least 1" in capsys.readouterr().err
    (tmp_path / "texts").mkdir()
    for name in ("a", "b"):
        (tmp_path / "texts" / f"{name}.txt").write_text("so we left then it rained\n", encoding="utf-8")
    before = torch.get_num_threads()
    try:
        assert cli.main(["--model", str(model_dir), str(tmp_path / "texts"), "-o", str(tmp_path / "out"), "--quiet",
                         "--threads", "3", "--report", str(tmp_path / "report.json")]) == 0
        assert torch.get_num_threads() == 3
    finally:
        torch.set_num_threads(before)
    report = json.loads((tmp_path / "report.json").read_text(encoding="utf-8"))
    assert report["threads"] == 3 and report["numerics"] == numeric_facts()
