"""``punctuate`` gives the same bytes on 1, 2 and 8 torch threads, and so does the evaluate stage, which decodes
through the same :class:`inference.punctuator.Punctuator` (``evaluate.threads``).

Each run is a fresh ``punctuate --threads N --format json`` process (pinned, as every run of it is), on a text of
some 1,500 words: its labels and every probability must be the same bytes. The models are the three families
``punctuate`` ships: an encoder tagger over a random BERT as wide as MiniLM (384, 12 heads: wide enough that
torch's kernels split their work between threads), the BLSTM reading timing cues (given the text's word times)
and the reduced Transformer, which decodes label by label.
"""

from __future__ import annotations

import json
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from tests.fixture_real_speech import talk_words

REPO = Path(__file__).resolve().parents[1]
THREADS = (1, 2, 8)


def wide_encoder_model(root: Path, words_model: Path) -> Path:
    """A tagger over a random BERT of MiniLM's width (2 layers), with ``words_model``'s token embedder."""
    import torch
    import transformers

    from corpus.labels import LABELS
    from models import build_model
    from tests.fixture_checkpoints import WORDS
    from training.model_output import write_model_dir

    specials = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    pieces = sorted({*WORDS, *"abcdefghijklmnopqrstuvwxyz'-", *(f"##{c}" for c in "abcdefghijklmnopqrstuvwxyz'-")})
    tokenizer = transformers.BertTokenizer(vocab={piece: index for index, piece in enumerate([*specials, *pieces])})
    torch.manual_seed(0)
    bert = transformers.BertModel(transformers.BertConfig(
        vocab_size=len(tokenizer), hidden_size=384, num_hidden_layers=2, num_attention_heads=12,
        intermediate_size=1536, max_position_embeddings=300, pad_token_id=0, type_vocab_size=2,
        initializer_range=0.3))
    bert.save_pretrained(str(root / "wide_bert"))
    tokenizer.save_pretrained(str(root / "wide_bert"))
    config = json.loads((words_model / "config.json").read_text(encoding="utf-8"))
    encoder = {"name": "encoder_tagger", "pretrained": str(root / "wide_bert"), "layers": 2, "freeze_layers": 0,
               "label_subword": "last", "dropout": 0.0, "max_subwords": 256, "head": "linear", "head_hidden": 0}
    torch.manual_seed(0)
    model = build_model(encoder, num_labels=len(LABELS), vector_dim=config["vector_dim"],
                        vocab_size=config["vocab_size"])
    return write_model_dir(root / "wide_encoder", model=model, weights=None, embedder=words_model / "embedder",
                           history=[], config={**config, "model": encoder})


def write_text(root: Path) -> tuple[Path, Path]:
    """Some 1,500 words, 15 a line, and their word times (a TSV: word, start, end; pauses after sentence ends)."""
    words, labels = talk_words(seed=77, sentences=220)
    text = root / "talk.txt"
    text.write_text("".join(" ".join(words[i:i + 15]) + "\n" for i in range(0, len(words), 15)), encoding="utf-8")
    rows, clock = ["word\tstart\tend"], 0.5
    for index, (word, label) in enumerate(zip(words, labels)):
        end = clock + 0.08 + 0.05 * len(word)
        rows.append(f"{word}\t{clock:.3f}\t{end:.3f}")
        clock = end + (0.6 if label in ("PERIOD", "QUESTION") else 0.15 if label == "COMMA" else 0.02 * (index % 3))
    times = root / "talk.tsv"
    times.write_text("\n".join(rows) + "\n", encoding="utf-8")
    return text, times


def punctuate(model: Path, text: Path, threads: int, out: Path, timings: Path | None) -> bytes:
    command = [sys.executable, "-m", "inference.cli", "--model", str(model), "--threads", str(threads),
               "--format", "json", str(text), "-o", str(out), *(["--alignment", str(timings)] if timings else [])]
    done = subprocess.run(command, cwd=REPO, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    return out.read_bytes()


@pytest.mark.slow  # nine fresh punctuate processes
def test_the_labels_are_the_same_bytes_on_1_2_and_8_threads(tmp_path):
    from tests.fixture_punctuate import train_models

    models = train_models(tmp_path)
    models["encoder"] = wide_encoder_model(tmp_path, models["transformer"])
    text, times = write_text(tmp_path)
    runs = [(name, threads) for name in ("encoder", "timing", "transformer") for threads in THREADS]
    with ThreadPoolExecutor(max_workers=2) as pool:
        outputs = dict(zip(runs, pool.map(
            lambda run: punctuate(models[run[0]], text, run[1], tmp_path / f"{run[0]}_{run[1]}.json",
                                  times if run[0] == "timing" else None), runs)))
    for name in ("encoder", "timing", "transformer"):
        assert len(json.loads(outputs[name, 1])["words"]) > 1500, name
        for threads in THREADS[1:]:
            assert outputs[name, threads] == outputs[name, 1], f"{name}: {threads} threads differ from 1"
