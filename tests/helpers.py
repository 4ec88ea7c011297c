"""Shared test helpers: model batches and training checks, word-vector files, the scripts as modules."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import torch

REPO = Path(__file__).resolve().parents[1]

#: The project's packages by layer, bottom first (docs/architecture.md): a package imports only packages of the
#: layers below it (tests/test_layering.py). pyproject.toml installs exactly these.
LAYERS = (
    ("corpus", "experiments", "executor"),
    ("aligner", "embeddings", "models"),
    ("audio", "trainset", "figures"),
    ("inference",),
    ("evaluation",),
    ("training",),
    ("realspeech", "reporting", "comparisons"),  # comparisons: A/B runs of two param sets (trains, scores, decides)
    ("pipeline",),
    ("paper_runs",),  # the papers' runs on a lent GPU: packs, launches and records runs of the pipeline's stages
)
PACKAGES = [package for layer in LAYERS for package in layer]


def context_rule_batch() -> dict[str, torch.Tensor]:
    """An 8x12 batch (last row padded after 9 tokens) whose labels need the right context: PERIOD before a
    word with a large first feature, COMMA on a word with a large second feature. Drawn from torch's
    current random state (seed it first)."""
    vectors = torch.randn(8, 12, 8)
    mask = torch.ones(8, 12, dtype=torch.bool)
    mask[-1, 9:] = False
    labels = torch.zeros(8, 12, dtype=torch.long)
    labels[:, :-1] = (vectors[:, 1:, 0] > 0.5).long() * 2
    labels[vectors[..., 1] > 1.0] = 1
    return {"vectors": vectors, "ids": torch.zeros(8, 12, dtype=torch.long), "mask": mask, "labels": labels}


def train_on_batch(model, batch: dict[str, torch.Tensor], steps: int, lr: float) -> list[float]:
    """Train ``model`` on one batch for ``steps`` Adam steps; return the loss of each step."""
    optimizer = torch.optim.Adam(model.parameters(), lr=lr)
    losses = []
    for _ in range(steps):
        optimizer.zero_grad()
        loss = model.loss(batch)
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    return losses


def overfit_accuracy(model, batch: dict[str, torch.Tensor], steps: int, lr: float = 1e-2) -> float:
    """Train ``model`` on one batch for ``steps`` Adam steps; return its accuracy on the real tokens."""
    train_on_batch(model, batch, steps, lr)
    model.eval()
    return (model.predict(batch) == batch["labels"])[batch["mask"]].float().mean().item()


def padded_batch(batch_size: int = 3, length: int = 9, dim: int = 50, short: int = 6, seed: int = 1) -> dict:
    """A random batch (vectors, ids 2..19, 4 labels) whose last row is padded after ``short`` tokens; seeds torch."""
    torch.manual_seed(seed)
    mask = torch.ones(batch_size, length, dtype=torch.bool)
    mask[-1, short:] = False
    return {"vectors": torch.randn(batch_size, length, dim), "ids": torch.randint(2, 20, (batch_size, length)),
            "mask": mask, "labels": torch.randint(0, 4, (batch_size, length))}


def scramble_padding(batch: dict) -> dict:
    """A copy of ``batch`` with other vectors and ids at its padded positions (which must not matter)."""
    changed = dict(batch, vectors=batch["vectors"].clone(), ids=batch["ids"].clone())
    changed["vectors"][~batch["mask"]] = 100.0
    changed["ids"][~batch["mask"]] = 7
    return changed


def write_word2vec_text(path: Path, vectors: dict[str, list[float]], header: bool = True) -> Path:
    """``vectors`` as a word2vec text file (two decimals; a ``count dim`` first line unless ``header`` is false)."""
    lines = [f"{len(vectors)} {len(next(iter(vectors.values())))}"] if header else []
    lines += [w + " " + " ".join(f"{x:.2f}" for x in v) for w, v in vectors.items()]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def read_word2vec_text(path: Path):
    """A word2vec text file with a ``count dim`` first line and single spaces (as :func:`write_word2vec_text` and
    ``tests.fixture_corpus.write_corpus`` write them) as a :class:`embeddings.table.VectorTable`, without gensim:
    every number parsed to float32 from its text, as gensim's ``load_word2vec_format`` does, so the vectors are
    the ones gensim loads (tests/test_embeddings_cache.py compares the caches built from either)."""
    from embeddings.table import VectorTable

    header, *lines = Path(path).read_text(encoding="utf-8").splitlines()
    count, dim = (int(x) for x in header.split())
    rows = [line.rstrip().split(" ") for line in lines]
    if len(rows) != count or any(len(row) != dim + 1 for row in rows):
        raise ValueError(f"{path}: expected {count} lines of a word and {dim} numbers after its header")
    vectors = np.array([[np.float32(x) for x in row[1:]] for row in rows], dtype=np.float32).reshape(count, dim)
    return VectorTable([row[0] for row in rows], vectors)


def imported_after(statement: str, modules: tuple[str, ...]) -> list[str]:
    """Which of ``modules`` a fresh interpreter (run in the repository) has loaded after ``statement``."""
    code = f"import json, sys; {statement}; print(json.dumps([m for m in {modules!r} if m in sys.modules]))"
    result = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout.splitlines()[-1])


def load_script(name: str):
    """``scripts/<name>.py`` imported as a module (the scripts are not a package: each runs as a file)."""
    spec = importlib.util.spec_from_file_location(name, REPO / "scripts" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
