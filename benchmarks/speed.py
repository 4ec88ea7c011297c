"""Speed benchmark: import times, training tokens/s of each experiment's model and ``punctuate`` words/s.

    .venv/bin/python benchmarks/speed.py [--params params.yaml] [--steps 20] [--artifacts artifacts]

Import times are those of a fresh interpreter (what every ``punctuate`` call and pipeline stage pays before
doing anything; tests/test_models_imports.py checks that no heavy optional library is among them). Training
speed is measured on random input vectors of the cached dimension (forward + backward + Adam step, batch and
sequence length from the active profile); punctuation speed runs the ``punctuate`` library path (tokenise,
embed, windowed decoding, render) of each experiment's trained model directory on the Ref test text.
Prints one line per figure; nothing is asserted (targets live here, not in timed tests). The figures of
``punctuate`` as a user runs it -- a fresh process per call: start-up against ``import torch``, words/s and peak
memory on 200,000 words -- come from ``benchmarks/punctuate_speed.py``. It runs under the stages' pinned
numerics (experiments/numerics.py): the kernels the pipeline and ``punctuate`` run.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
from pathlib import Path

from experiments.numerics import pin_numerics  # noqa: E402

pin_numerics()  # the pipeline's numerics, before numpy or torch loads (experiments/numerics.py)

import torch  # noqa: E402

from corpus.iwslt import read_iwslt  # noqa: E402
from corpus.labels import LABELS  # noqa: E402
from experiments.params import experiment_config, load_params  # noqa: E402
from inference.punctuator import Punctuator, render_text  # noqa: E402
from models import build_model  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
#: What a fresh interpreter imports, timed: the layers every stage imports, and `punctuate` up to its model.
IMPORTS = {
    "import corpus": "import corpus",
    "import embeddings": "import embeddings",
    "import models": "import models",
    "punctuate (cli + inference)": "import inference.cli, inference.punctuator",
    "model directory loader": "import inference.model_dir",
}


def import_seconds(statement: str, repeats: int = 3) -> float:
    """The best of ``repeats`` wall times of a fresh interpreter running ``statement`` (interpreter start included)."""
    best = float("inf")
    for _ in range(repeats):
        started = time.perf_counter()
        subprocess.run([sys.executable, "-c", statement], cwd=REPO, check=True)
        best = min(best, time.perf_counter() - started)
    return best


def training_tokens_per_second(model_config: dict, train_config: dict, *, vector_dim: int, steps: int) -> float:
    torch.manual_seed(0)
    batch_size, seq_len = int(train_config["batch_size"]), int(train_config["seq_len"])
    model = build_model(model_config, num_labels=len(LABELS), vector_dim=vector_dim, vocab_size=30000)
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-4)
    batch = {
        "vectors": torch.randn(batch_size, seq_len, vector_dim),
        "ids": torch.randint(2, 30000, (batch_size, seq_len)),
        "mask": torch.ones(batch_size, seq_len, dtype=torch.bool),
        "labels": torch.randint(0, len(LABELS), (batch_size, seq_len)),
        "words": [["word"] * seq_len for _ in range(batch_size)],
    }
    model.train()
    for step in range(steps + 2):
        if step == 2:  # two warm-up steps
            started = time.perf_counter()
        optimizer.zero_grad()
        model.loss(batch, 0.1).backward()
        optimizer.step()
    return steps * batch_size * seq_len / (time.perf_counter() - started)


def punctuate_words_per_second(model_dir: Path, text: str) -> tuple[float, float, int]:
    started = time.perf_counter()
    punctuator = Punctuator(model_dir)
    load_seconds = time.perf_counter() - started
    started = time.perf_counter()
    words, labels = punctuator.punctuate(text)
    render_text(words, labels)
    return len(words) / (time.perf_counter() - started), load_seconds, len(words)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--params", default="params.yaml")
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--vector-dim", type=int, default=50)
    parser.add_argument("--threads", type=int, default=None, help="torch threads (default: the profile's)")
    parser.add_argument("--artifacts", default="artifacts", help="parent of EXPERIMENT/model directories")
    parser.add_argument("--text", default="data/prepared/ref.tsv", help="IWSLT file whose words are punctuated")
    args = parser.parse_args()

    params = load_params(args.params)
    threads = args.threads or int(params["active"]["train"]["threads"])
    torch.set_num_threads(threads)
    print(f"profile {params['profile']}, torch {torch.__version__}, {threads} threads")
    baseline = import_seconds("pass")
    print(f"python start: {baseline:.2f} s")
    for name, statement in IMPORTS.items():
        print(f"{name}: {import_seconds(statement) - baseline:.2f} s in a fresh interpreter (after its start)")
    for name in params["experiments"]:
        model_config, train_config = experiment_config(params, name)
        speed = training_tokens_per_second(model_config, train_config, vector_dim=args.vector_dim, steps=args.steps)
        print(f"train {name}: {speed:,.0f} tokens/s (batch {train_config['batch_size']} x {train_config['seq_len']})")
    if not Path(args.text).exists():
        print(f"punctuate: skipped (needs {args.text}: run `dvc repro` first)")
        return
    text = " ".join(read_iwslt(args.text).words)
    for name in params["experiments"]:
        model_dir = Path(args.artifacts) / name / "model"
        if not (model_dir / "config.json").exists():
            print(f"punctuate {name}: skipped (no trained {model_dir})")
            continue
        speed, load_seconds, words = punctuate_words_per_second(model_dir, text)
        print(f"punctuate {name}: {speed:,.0f} words/s on {words} words (model + vectors load {load_seconds:.1f} s)")


if __name__ == "__main__":
    main()
