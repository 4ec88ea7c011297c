"""No training step waits for the GPU (GPU leases): every experiment of params.yaml, at the ``paper`` profile's sizes
(those the GPU kit trains), trains through the loop with CUDA's sync debug mode set to fail, on word vectors and
(the Transformer) on learned embeddings of token ids; and a dev evaluation waits for the device a fixed number of
times whatever its number of batches. Without a GPU only the host-side part runs (which batches the trainer marks
whole)."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import torch

from experiments.params import load_params
from models.encoders import ALL_REAL
from tests.fixture_corpus import TINY_TRAIN, write_prepared_corpus
from tests.helpers import REPO
from training import train_model
from training.batches import TokenStore
from training.dev_eval import cut_batch, evaluate_on_tokens

needs_cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
#: steps run unchecked first: one-time set-up (optimizer state, cuDNN plans) may wait once
WARM_UP_STEPS = 1


@pytest.mark.parametrize("resident", [False, True])
def test_the_trainer_marks_the_batches_without_padding(resident):
    store = TokenStore(np.zeros((25, 2), np.float32), np.arange(25), np.zeros(25, np.int64), words=None,
                       device=torch.device("cpu"), resident=resident)
    whole = cut_batch(store, np.array([0, 10]), 10)
    assert whole[ALL_REAL] is True and bool(whole["mask"].all())
    last = cut_batch(store, np.array([10, 20]), 10)  # the window at 20 holds the last 5 tokens
    assert last[ALL_REAL] is False and not bool(last["mask"].all())


def paper_models() -> dict[str, dict]:
    """Every experiment of params.yaml at the ``paper`` profile's sizes, by name."""
    return {name: experiment["model"]
            for name, experiment in load_params(REPO / "params.yaml", profile="paper")["active"]["experiments"].items()}


@pytest.fixture(scope="module")
def caches(tmp_path_factory):
    """One tiny corpus as word vectors (``vectors``) and as token ids alone (``ids``: learned embeddings)."""
    from embeddings.cache import build_feature_cache

    root = tmp_path_factory.mktemp("host_syncs")
    corpus = write_prepared_corpus(root / "corpus", root / "prepared", talks=20, sentences_per_talk=20,
                                   train_tokens=2500)
    build_feature_cache(root / "prepared", root / "vectors", oov="random",
                        word_source={"type": "word2vec-text", "path": str(corpus["vectors"])})
    build_feature_cache(root / "prepared", root / "ids", word_source={"type": "none"}, oov="random")
    return root


RUNS = [(name, "vectors") for name in sorted(paper_models())] + [("transformer", "ids")]


@needs_cuda
@pytest.mark.parametrize(("experiment", "inputs"), RUNS)
def test_a_training_step_of_every_model_does_not_wait_for_the_gpu(experiment, inputs, caches, tmp_path,
                                                                   monkeypatch):
    from training import loop

    step = loop._Run._step
    checked = []

    def step_failing_on_a_sync(self, *args):
        if self.steps_run < WARM_UP_STEPS:
            return step(self, *args)
        torch.cuda.set_sync_debug_mode("error")  # a synchronizing call raises instead of waiting
        try:
            return step(self, *args)
        finally:
            torch.cuda.set_sync_debug_mode("default")
            checked.append(self.steps_run)

    monkeypatch.setattr(loop._Run, "_step", step_failing_on_a_sync)
    train = {**TINY_TRAIN, "device": "cuda", "epochs": 1, "max_steps": WARM_UP_STEPS + 2, "eval_every_steps": 1000,
             "log_every_steps": 1000, "dev_eval_tokens": 100}
    result = train_model(caches / inputs, tmp_path / "model", tmp_path / "state",
                         model_config=paper_models()[experiment], train_config=train, window=30, stride=15)
    assert result.metrics["steps"] == WARM_UP_STEPS + 2 and len(checked) == 2


@needs_cuda
@pytest.mark.parametrize("experiment", ["blstm", "transformer", "ff2", "minilm"])
def test_a_dev_evaluation_waits_for_the_gpu_a_fixed_number_of_times(experiment, caches):
    from embeddings.store import load_split, load_split_words
    from models import build_model
    from training.dev_eval import TokenSlice

    features = caches / "vectors"
    vocab_size = len((features / "embedder" / "vocab.txt").read_text(encoding="utf-8").splitlines())
    dev = load_split(features, "dev")
    model = build_model(paper_models()[experiment], num_labels=4, vector_dim=int(dev.vectors.shape[1]),
                        vocab_size=vocab_size).cuda()
    dev = TokenSlice(dev, None, load_split_words(features, "dev") if model.reads_words else None)
    device = torch.device("cuda")
    store = TokenStore(dev.vectors, dev.ids, np.asarray(dev.labels).astype(np.int64), words=dev.words,
                       device=device, resident=True)

    def syncs(batch_size: int) -> list[str]:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            torch.cuda.set_sync_debug_mode("warn")
            try:
                evaluate_on_tokens(model, dev, window=30, stride=15, label_smoothing=0.1, device=device,
                                   batch_size=batch_size, store=store,
                                   autocast=lambda: torch.autocast("cuda", dtype=torch.bfloat16))
            finally:
                torch.cuda.set_sync_debug_mode("default")
        return [str(w.message) for w in caught if "synchroniz" in str(w.message)]

    windows = -(-store.num_tokens // 30)
    assert windows >= 12
    many, one = syncs(batch_size=2), syncs(batch_size=windows)
    # the losses, the predictions and (recurrent models) the packing of the batch with the short last window: the
    # same whether the evaluation has one batch or many
    assert len(many) == len(one) and len(many) <= 6, many
