"""Loading a trained model directory: fast (vectors inside, no gensim), and every damaged file named."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

from corpus.labels import LABELS
from embeddings.embedder import TokenEmbedder
from embeddings.vocab import build_vocab
from inference import model_dir as model_dir_module
from inference.model_dir import ModelDirectoryError, load_trained_model
from models import build_model
from tests.helpers import write_word2vec_text

REPO = Path(__file__).resolve().parents[1]
MODEL = {"name": "blstm", "hidden": 8, "layers": 1, "dropout": 0.0}
VECTORS = {"the": [0.1, 0.2, 0.3, 0.4], "river": [0.5, -0.5, 0.25, 1.0], "was": [-1.0, 0.0, 0.5, 0.75],
           "cold": [0.0, 0.0, 1.0, -1.0], "done": [0.3, 0.3, -0.3, 0.3]}
TRAIN_WORDS = ["the", "river", "was", "cold", "the", "river", "was", "done", "unseen"]


def make_model_dir(root: Path, vectors_file: Path) -> Path:
    """A model directory as training writes it (config.json, model.pt, embedder/), made by hand."""
    embedder = TokenEmbedder({"type": "word2vec-text", "path": str(vectors_file)}, "random", build_vocab(TRAIN_WORDS))
    directory = root / "model"
    embedder.restricted(TRAIN_WORDS).save(directory / "embedder")
    torch.manual_seed(0)
    model = build_model(MODEL, num_labels=len(LABELS), vector_dim=embedder.dim, vocab_size=len(embedder.vocab))
    torch.save(model.state_dict(), directory / "model.pt")
    config = {"model": MODEL, "train": {}, "labels": list(LABELS), "vector_dim": embedder.dim,
              "vocab_size": len(embedder.vocab), "window": 30, "stride": 15}
    (directory / "config.json").write_text(json.dumps(config), encoding="utf-8")
    return directory


@pytest.fixture()
def model_dir(tmp_path) -> Path:
    return make_model_dir(tmp_path, write_word2vec_text(tmp_path / "vectors.txt", VECTORS))


def test_loads_the_model_in_eval_mode_with_its_config(model_dir):
    model, config = load_trained_model(model_dir)
    assert not model.training and config["vector_dim"] == 4 and config["model"] == MODEL
    expected = torch.load(model_dir / "model.pt", weights_only=True)
    assert all(torch.equal(value, expected[name]) for name, value in model.state_dict().items())


def test_a_truncated_model_file_is_named(model_dir):
    weights = model_dir / "model.pt"
    weights.write_bytes(weights.read_bytes()[: weights.stat().st_size // 2])
    with pytest.raises(ModelDirectoryError, match=r"model\.pt: cannot be read as model weights .*truncated"):
        load_trained_model(model_dir)
    weights.write_bytes(b"")
    with pytest.raises(ValueError, match=r"model\.pt: cannot be read"):  # a ValueError: punctuate exits 2
        load_trained_model(model_dir)


def test_missing_damaged_or_mismatched_files_are_named(model_dir, tmp_path):
    with pytest.raises(FileNotFoundError, match="no config.json"):
        load_trained_model(tmp_path / "nowhere")
    config_path = model_dir / "config.json"
    config = config_path.read_text()
    config_path.write_text(config[:-5])
    with pytest.raises(ModelDirectoryError, match=r"config\.json: not valid JSON"):
        load_trained_model(model_dir)
    config_path.write_text(json.dumps({**json.loads(config), "model": {**MODEL, "hidden": 16}}))
    with pytest.raises(ModelDirectoryError, match=r"model\.pt: does not fit the model of .*config\.json"):
        load_trained_model(model_dir)
    config_path.write_text(json.dumps({**json.loads(config), "vocab_size": 99}))
    with pytest.raises(ModelDirectoryError, match=r"embedder\.json: vocabulary of 8 ids, but the model .* has 99"):
        load_trained_model(model_dir)
    config_path.write_text(config)
    table = model_dir / "embedder" / "word_vectors_vectors.npy"
    table.write_bytes(table.read_bytes()[:100])
    with pytest.raises(ModelDirectoryError, match=r"word_vectors_vectors\.npy: cannot be read"):
        load_trained_model(model_dir)
    table.unlink()
    with pytest.raises(FileNotFoundError, match=r"word_vectors_vectors\.npy: missing"):
        load_trained_model(model_dir)
    (model_dir / "model.pt").unlink()
    (model_dir / "embedder" / "word_vectors_words.txt").unlink()
    (model_dir / "embedder" / "embedder.json").unlink()
    with pytest.raises(FileNotFoundError, match=r"embedder\.json: missing"):
        load_trained_model(model_dir)


def test_a_model_from_a_relative_vector_file_runs_from_another_folder_after_the_file_changed(tmp_path):
    """A model built from a word2vec-text file named by a relative path: its vectors are inside the model
    directory, so it loads from any folder, after the file changed and after it is gone, without gensim."""
    project = tmp_path / "project"
    project.mkdir()
    write_word2vec_text(project / "vectors.txt", VECTORS)
    here = os.getcwd()
    os.chdir(project)
    try:
        directory = make_model_dir(project, Path("vectors.txt"))
    finally:
        os.chdir(here)
    assert json.loads((directory / "embedder" / "embedder.json").read_text())["word_source"]["path"] == "vectors.txt"
    words = ["the", "river", "was", "cold", "and", "done"]
    script = (
        "import json, sys\n"
        "import torch\n"
        "from embeddings.embedder import TokenEmbedder\n"
        "from inference.model_dir import load_trained_model\n"
        "model, config = load_trained_model(sys.argv[1])\n"
        "embedded = TokenEmbedder.load(sys.argv[1] + '/embedder').embed(json.loads(sys.argv[2]))\n"
        "batch = {'vectors': torch.from_numpy(embedded.vectors)[None],\n"
        "         'ids': torch.from_numpy(embedded.ids).long()[None],\n"
        "         'mask': torch.ones(1, len(embedded.ids), dtype=torch.bool)}\n"
        "heavy = [m for m in ('gensim', 'matplotlib', 'pandas', 'transformers') if m in sys.modules]\n"
        "print(json.dumps({'labels': model.predict(batch)[0].tolist(), 'vectors': embedded.vectors.tolist(),\n"
        "                  'heavy': heavy}))\n"
    )
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    outputs = []
    for change in ("changed", "gone"):
        if change == "changed":
            write_word2vec_text(project / "vectors.txt", {**VECTORS, "the": [9.0, 9.0, 9.0, 9.0]})
        else:
            (project / "vectors.txt").unlink()
        result = subprocess.run([sys.executable, "-c", script, str(directory), json.dumps(words)], cwd=elsewhere,
                                env={**os.environ, "PYTHONPATH": str(REPO)}, capture_output=True, text=True,
                                timeout=300)
        assert result.returncode == 0, result.stderr
        outputs.append(json.loads(result.stdout))
    assert outputs[0] == outputs[1]
    assert outputs[0]["heavy"] == []
    np.testing.assert_array_equal(np.float32(outputs[0]["vectors"][0]), np.float32(VECTORS["the"]))


def test_the_loader_does_not_import_the_training_loop():
    from tests.helpers import imported_after

    assert imported_after("import inference.model_dir", ("training.loop", "training",
                                                           "gensim", "matplotlib")) == []


def test_punctuate_names_a_truncated_model_file(model_dir, tmp_path):
    """Through the command: exit 2 and the file named (needs inference/punctuator.py to load with model_dir)."""
    import inference.punctuator as inference

    if inference.load_trained_model is not model_dir_module.load_trained_model:
        pytest.skip("inference/punctuator.py does not load through inference.model_dir yet")
    weights = model_dir / "model.pt"
    weights.write_bytes(weights.read_bytes()[:1000])
    result = subprocess.run([sys.executable, "-m", "inference.cli", "--model", str(model_dir)], cwd=REPO,
                            input=b"the river was cold", capture_output=True, timeout=300)
    assert result.returncode == 2
    assert f"{weights}: cannot be read as model weights" in result.stderr.decode()
    assert b"Traceback" not in result.stderr


def test_an_encoder_model_missing_a_file_of_its_encoder_is_named(tmp_path):
    """``encoder/tokenizer.json`` gone: an error naming it, from the loader and from punctuate (exit 2, one line),
    not tokenizers' "No such file or directory (os error 2)" in a traceback."""
    pytest.importorskip("transformers")
    from tests.fixture_checkpoints import make_checkpoint
    from training.model_output import write_model_dir

    directory = make_model_dir(tmp_path, write_word2vec_text(tmp_path / "vectors.txt", VECTORS))
    config = json.loads((directory / "config.json").read_text())
    encoder = {"name": "encoder_tagger", "pretrained": str(make_checkpoint(tmp_path / "bert", "bert")), "layers": 1,
               "freeze_layers": 0, "label_subword": "last", "dropout": 0.0, "max_subwords": 64}
    model = build_model(encoder, num_labels=len(LABELS), vector_dim=config["vector_dim"],
                        vocab_size=config["vocab_size"])
    directory = write_model_dir(tmp_path / "encoder_model", model=model, weights=None,
                                embedder=directory / "embedder", history=[], config={**config, "model": encoder})
    assert load_trained_model(directory)[0].traced  # the trace and the tokenizers-only tokenizer
    for name in ("tokenizer.json", "config.json"):
        missing = directory / "encoder" / name
        missing.rename(tmp_path / name)
        with pytest.raises(FileNotFoundError, match=f"{missing}: missing"):
            load_trained_model(directory)
        result = subprocess.run([sys.executable, "-m", "inference.cli", "--model", str(directory)], cwd=REPO,
                                input=b"the river was cold", capture_output=True, timeout=300)
        assert result.returncode == 2 and b"Traceback" not in result.stderr
        assert result.stderr.decode().splitlines() == [f"punctuate: error: {missing}: missing; " + (
            "the model directory's encoder files are incomplete (copy the whole model directory)"
            if name == "tokenizer.json" else "the model directory is incomplete")]
        (tmp_path / name).rename(missing)
