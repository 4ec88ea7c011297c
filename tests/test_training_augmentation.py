"""The ASR-robustness training levers: ASR-style noise on the training batches (Alam et al. 2020) and jittered window
starts (Shi et al. 2021) -- their statistics, labels, determinism, and that off means the batches and plans of
before, to the byte."""

from __future__ import annotations

import json
from types import SimpleNamespace

import numpy as np
import pytest
import torch

from corpus.labels import NO_MARK_ID
from embeddings.vocab import UNK, UNK_ID
from inference.windows import make_batch
from models.encoders import ALL_REAL
from tests.fixture_corpus import TINY_BLSTM, TINY_TRAIN, write_feature_cache
from training.batches import AsrNoise, TokenStore, asr_noise, epoch_plan, real_tokens, schedule_steps
from training.config import ConfigError, TrainConfig
from training.dev_eval import cut_batch

CPU = torch.device("cpu")
PAPER = dict(rate=0.15, substitute=0.4, delete=0.4)  # Alam et al.: 0.15, shares 0.4 / 0.4 / 0.2
LEVERS_OFF = {"decode_combine": "centre", "window_jitter": 0, "augment_rate": 0.0, "augment_substitute": 0.4,
              "augment_delete": 0.4}


def stream(n: int, dim: int = 3):
    """Token i: vector (i, i+0.5, -i), id i + 2 (never UNK_ID), label i % 4, word "w<i>": every output position
    tells which stream token it came from."""
    positions = np.arange(n, dtype=np.float32)
    vectors = np.stack([positions, positions + 0.5, -positions][:dim], axis=1).astype(np.float32)
    return vectors, np.arange(n, dtype=np.int64) + 2, (np.arange(n) % 4).astype(np.int8), [f"w{i}" for i in range(n)]


def noise(seed: int = 7, **options) -> AsrNoise:
    settings = {**PAPER, **options}
    return AsrNoise(settings["rate"], settings["substitute"], settings["delete"], seed,
                    unk_vector=np.full(settings.get("dim", 3), 9.0, np.float32), unk_word="[UNK]",
                    speech_columns=settings.get("speech_columns", "none"))


def store(n: int = 5000, *, with_noise: AsrNoise | None = None, resident: bool = False, dim: int = 3) -> TokenStore:
    vectors, ids, labels, words = stream(n, dim)
    return TokenStore(vectors, ids, labels, words=words, device=CPU, resident=resident, noise=with_noise)


def counts(source, inserted, mask, starts):
    """Per window: (substituted, deleted, inserted, source tokens read) from an alteration map."""
    deleted = read = 0
    for row, start in enumerate(starts):
        kept = source[row][mask[row] & ~inserted[row]]
        skipped = int(kept[0] - start) + int((np.diff(kept) - 1).sum()) if len(kept) else 0
        deleted += skipped
        read += len(kept) + skipped
    return deleted, read


# ------------------------------------------------------------------------------------------------ statistics

def test_rates_and_shares_are_the_papers_on_a_large_stream():
    n, window = 400_000, 100
    starts = np.arange(0, n - 2 * window, window)
    source, unknown, inserted, mask = noise().alterations(starts, window, n)
    deleted, read = counts(source, inserted, mask, starts)
    substituted, added = int((unknown & ~inserted).sum()), int(inserted.sum())
    altered = substituted + deleted + added
    # ~390k tokens read: the binomial standard error of a rate near 0.15 is ~0.0006, of a share ~0.003
    assert altered / read == pytest.approx(0.15, abs=0.003)
    assert substituted / altered == pytest.approx(0.4, abs=0.01)
    assert deleted / altered == pytest.approx(0.4, abs=0.01)
    assert added / altered == pytest.approx(0.2, abs=0.01)


def test_each_kind_alone_and_none():
    n, window, starts = 50_000, 50, np.arange(0, 49_000, 50)
    for shares, kind in (((1.0, 0.0), "substitute"), ((0.0, 1.0), "delete"), ((0.0, 0.0), "insert")):
        source, unknown, inserted, mask = noise(substitute=shares[0], delete=shares[1]).alterations(starts, window, n)
        deleted, _ = counts(source, inserted, mask, starts)
        assert (kind == "substitute") == bool((unknown & ~inserted).any())
        assert (kind == "delete") == (deleted > 0)
        assert (kind == "insert") == bool(inserted.any())
    source, unknown, inserted, mask = noise(rate=0.0).alterations(starts, window, n)
    assert not unknown.any() and np.array_equal(source, starts[:, None] + np.arange(window))


# ------------------------------------------------------------------------------------------------ labels

def test_labels_follow_the_authors_code_and_windows_keep_their_shape():
    """Substituted: the unknown token with the token's own label; inserted: the unknown token labelled O;
    deleted: gone with its label; the rest: the stream's tokens in order. The mask (and ALL_REAL) is the
    unaltered batch's, at the stream's end too."""
    n, window = 1003, 40
    noisy, plain = store(n, with_noise=noise(rate=0.5)), store(n)
    starts = np.array([0, 40, 500, 963, 980])  # the last two reach the stream's end (980: a short window)
    batch, reference = cut_batch(noisy, starts, window), cut_batch(plain, starts, window)
    assert torch.equal(batch["mask"], reference["mask"]) and batch[ALL_REAL] == reference[ALL_REAL] is False
    source, unknown, inserted, mask = noisy.noise.alterations(starts, window, n)
    vectors, ids, labels = batch["vectors"].numpy(), batch["ids"].numpy(), batch["labels"].numpy()
    seen = set()
    for row, start in enumerate(starts):
        real = int(mask[row].sum())
        assert real == min(window, n - start) and len(batch["words"][row]) == real
        previous = start - 1
        for i in range(real):
            word = batch["words"][row][i]
            if inserted[row, i]:
                seen.add("insert")
                assert (word, ids[row, i], labels[row, i]) == ("[UNK]", UNK_ID, NO_MARK_ID)
                assert (vectors[row, i] == 9.0).all()
                continue
            token = int(source[row, i])
            assert token > previous  # in stream order; a gap is a deletion
            seen.update({"delete"} if token > previous + 1 else set())
            previous = token
            assert labels[row, i] == token % 4  # a substituted token keeps its label
            if unknown[row, i]:
                seen.add("substitute")
                assert (word, ids[row, i]) == ("[UNK]", UNK_ID) and (vectors[row, i] == 9.0).all()
            else:
                assert (word, ids[row, i]) == (f"w{token}", token + 2)
                assert np.array_equal(vectors[row, i], [token, token + 0.5, -token])
        assert (vectors[row, real:] == 0).all() and (ids[row, real:] == 0).all() and (labels[row, real:] == 0).all()
    assert seen == {"substitute", "delete", "insert"}


def test_speech_columns_kept_by_a_substitution_and_zero_for_an_insertion():
    """A feature set of word vectors with speech columns after them (combine: concat): the unknown token has the
    <unk> word vector; a substituted token keeps its own speech columns, an inserted one has zeros there. Summed
    word + speech vectors cannot be split: the unknown row is the <unk> vector alone."""
    n, window, starts = 3000, 50, np.arange(0, 2900, 50)
    concat = AsrNoise(0.3, 0.5, 0.0, 1, unk_vector=np.array([9.0, 8.0], np.float32), speech_columns="concat")
    batch = store(n, with_noise=concat).batch(starts, window)
    source, unknown, inserted, _ = concat.alterations(starts, window, n)
    vectors = batch["vectors"].numpy()
    substituted = unknown & ~inserted
    assert substituted.any() and inserted.any()
    assert (vectors[unknown][:, :2] == [9.0, 8.0]).all()
    assert np.array_equal(vectors[substituted][:, 2], -source[substituted].astype(np.float32))  # its own
    assert (vectors[inserted][:, 2] == 0).all()
    summed = AsrNoise(0.3, 0.5, 0.0, 1, unk_vector=np.array([9.0, 8.0, 7.0], np.float32), speech_columns="sum")
    vectors = store(n, with_noise=summed).batch(starts, window)["vectors"].numpy()
    assert (vectors[unknown] == [9.0, 8.0, 7.0]).all()
    speech_only = AsrNoise(0.3, 0.5, 0.0, 1, unk_vector=np.zeros(0, np.float32), speech_columns="sum")
    row, kept = speech_only.unknown_row(3)  # no word vectors (word source none): the speech is all there is
    assert (row == 0).all() and kept.all()


# ------------------------------------------------------------------------------------------------ determinism

def test_the_noise_is_a_function_of_the_seed_and_the_windows():
    starts = np.array([300, 0, 1200, 700])
    first = store(with_noise=noise(seed=3)).batch(starts, 100)
    again = store(with_noise=noise(seed=3)).batch(starts, 100)
    for key in ("vectors", "ids", "mask", "labels"):
        assert first[key].numpy().tobytes() == again[key].numpy().tobytes(), key
    assert first["words"] == again["words"]
    other_seed = store(with_noise=noise(seed=4)).batch(starts, 100)
    other_batch = store(with_noise=noise(seed=3)).batch(starts[::-1], 100)
    assert not torch.equal(first["ids"], other_seed["ids"])
    assert not torch.equal(first["ids"].flip(0), other_batch["ids"])  # each batch draws afresh


def test_a_resident_store_cuts_the_same_noisy_batches():
    starts = np.array([0, 4900, 2500, 37])
    host = store(with_noise=noise()).batch(starts, 100)
    resident = store(with_noise=noise(), resident=True).batch(starts, 100)
    for key in ("vectors", "ids", "mask", "labels"):
        assert torch.equal(host[key], resident[key]), key
    assert host["words"] == resident["words"]


def test_noise_off_is_the_batch_of_before():
    vectors, ids, labels, words = stream(700)
    starts = np.array([600, 0, 250])
    before = make_batch(vectors, ids, [(s, min(s + 100, 700)) for s in starts], 100, labels, words)
    for resident in (False, True):
        batch = store(700, resident=resident).batch(starts, 100)
        for key in ("vectors", "ids", "mask", "labels"):
            assert torch.equal(batch[key], before[key]), key
        assert batch["words"] == before["words"]
    assert asr_noise(TrainConfig.from_mapping(TINY_TRAIN), "/nonexistent", None) is None


def test_the_levers_at_their_defaults_record_nothing_new():
    """Off, the new settings are not recorded: model directories and checkpoint fingerprints stay as they were."""
    assert TrainConfig.from_mapping({**TINY_TRAIN, **LEVERS_OFF}).as_params() == TINY_TRAIN
    on = TrainConfig.from_mapping({**TINY_TRAIN, "augment_rate": 0.15, "window_jitter": 5, "decode_combine": "sum"})
    assert {key: on.as_params()[key] for key in ("augment_rate", "window_jitter", "decode_combine")} == {
        "augment_rate": 0.15, "window_jitter": 5, "decode_combine": "sum"}


@pytest.mark.parametrize("change, message", [
    ({"augment_rate": 1.0}, r"augment_rate: must be in \[0, 1\)"),
    ({"augment_substitute": 0.7}, "augment_delete: must be at most 1 - augment_substitute"),
    ({"window_jitter": 30}, r"window_jitter: must be in \[0, seq_len\)"),
    ({"decode_combine": "mean"}, "decode_combine: must be one of centre, sum"),
])
def test_bad_lever_settings_are_refused(change, message):
    with pytest.raises(ConfigError, match=message):
        TrainConfig.from_mapping({**TINY_TRAIN, **change})


# ------------------------------------------------------------------------------------------------ window plans

def legacy_plan(num_tokens, seq_len, batch_size, seed, epoch):
    """epoch_plan as it was before window_jitter (the commit before the ASR-robustness levers)."""
    rng = np.random.default_rng([seed, epoch])
    offset = int(rng.integers(seq_len)) if num_tokens > 2 * seq_len else 0
    starts = np.arange(offset, max(num_tokens - seq_len, 0) + 1, seq_len)
    if len(starts) == 0:
        starts = np.array([0])
    starts = rng.permutation(starts)
    return [starts[i:i + batch_size] for i in range(0, len(starts), batch_size)]


@pytest.mark.parametrize("num_tokens", [50, 150, 10_000, 123_457])
def test_without_jitter_the_plan_is_the_plan_of_before(num_tokens):
    for epoch in range(3):
        plan, before = epoch_plan(num_tokens, 100, 32, 1, epoch), legacy_plan(num_tokens, 100, 32, 1, epoch)
        assert [b.tolist() for b in plan] == [b.tolist() for b in before]


def test_jittered_windows_have_their_own_boundaries_and_the_steps_are_counted_on_the_host():
    num_tokens, seq_len, jitter = 100_000, 100, 20
    plans = [np.sort(np.concatenate(epoch_plan(num_tokens, seq_len, 32, 1, epoch, jitter=jitter)))
             for epoch in range(3)]
    for starts in plans:
        gaps = np.diff(starts)
        assert starts.min() >= 0 and starts.max() <= num_tokens - seq_len
        assert gaps.min() >= seq_len - jitter and gaps.max() <= seq_len + jitter
        assert len(np.unique(starts % seq_len)) > 10  # no grid
        assert real_tokens(starts, seq_len, num_tokens) == len(starts) * seq_len
    assert len({tuple(p.tolist()) for p in plans}) == 3
    again = [np.sort(np.concatenate(epoch_plan(num_tokens, seq_len, 32, 1, epoch, jitter=jitter)))
             for epoch in range(3)]
    assert all(np.array_equal(a, b) for a, b in zip(plans, again))
    settings = {**TINY_TRAIN, "seq_len": seq_len, "batch_size": 32, "epochs": 3, "window_jitter": jitter}
    expected = sum(len(epoch_plan(num_tokens, seq_len, 32, TINY_TRAIN["seed"], e, jitter=jitter)) for e in range(3))
    assert schedule_steps(num_tokens, settings) == expected == schedule_steps(num_tokens,
                                                                               TrainConfig.from_mapping(settings))
    assert schedule_steps(num_tokens, {**settings, "window_jitter": 0}) == schedule_steps(
        num_tokens, {key: value for key, value in settings.items() if key != "window_jitter"})


# ------------------------------------------------------------------------------------------------ in training

@pytest.fixture(scope="module")
def features(tmp_path_factory):
    return write_feature_cache(tmp_path_factory.mktemp("augmentation"), talks=8, sentences_per_talk=10,
                               train_tokens=800)


def test_the_unknown_token_of_a_run(features):
    """GloVe-style inputs: the embedder's vector of <unk> and UNK_ID; a model reading words: its tokenizer's unk."""
    from embeddings.embedder import TokenEmbedder

    config = TrainConfig.from_mapping({**TINY_TRAIN, "augment_rate": 0.15})
    vector_model = asr_noise(config, features, SimpleNamespace(reads_words=False))
    expected = TokenEmbedder.load(features / "embedder").embed([UNK]).vectors[0]
    assert np.array_equal(vector_model.unk_vector, expected) and vector_model.unk_word == UNK
    assert (vector_model.rate, vector_model.substitute, vector_model.delete, vector_model.seed) == (
        0.15, 0.4, 0.4, TINY_TRAIN["seed"])
    words_model = SimpleNamespace(reads_words=True, tokenizer=SimpleNamespace(unk_token="[UNK]"))
    assert asr_noise(config, features, words_model).unk_word == "[UNK]"


def test_a_timing_twin_keeps_its_cues_on_substitution(features, tmp_path):
    """A feature set with timing cues after the word vectors (its speech.json: combine concat): the noise knows
    which columns are the word's."""
    import shutil

    from embeddings.store import SPEECH_JSON

    twin = tmp_path / "features"
    shutil.copytree(features / "embedder", twin / "embedder")
    (twin / "embedder" / SPEECH_JSON).write_text(json.dumps({"combine": "concat"}), encoding="utf-8")
    made = asr_noise(TrainConfig.from_mapping({**TINY_TRAIN, "augment_rate": 0.15}), twin,
                     SimpleNamespace(reads_words=False))
    dim = len(made.unk_vector)
    row, kept = made.unknown_row(dim + 2)
    assert made.speech_columns == "concat" and np.array_equal(row[:dim], made.unk_vector)
    assert (row[dim:] == 0).all() and kept.tolist() == [False] * dim + [True, True]


def test_a_noisy_run_is_recorded_and_repeats_to_the_byte(features, tmp_path):
    """A few steps of a BLSTM with every lever on: the same seed gives the same weights; the model directory
    records the settings; the noise changes what the model learns."""
    settings = {**TINY_TRAIN, "max_steps": 3, "eval_every_steps": 3, "dev_eval_tokens": 60, "augment_rate": 0.15,
                "window_jitter": 5, "decode_combine": "sum"}
    from training import train_model

    runs = [train_model(features, tmp_path / name, tmp_path / f"{name}_state", model_config=TINY_BLSTM,
                        train_config=train, window=30, stride=10)
            for name, train in (("a", settings), ("b", settings), ("plain", {**settings, "augment_rate": 0.0}))]
    weights = [torch.load(run.model_dir / "model.pt", weights_only=True) for run in runs]
    assert all(torch.equal(weights[0][k], weights[1][k]) for k in weights[0])
    assert not all(torch.equal(weights[0][k], weights[2][k]) for k in weights[0])
    recorded = json.loads((tmp_path / "a" / "config.json").read_text(encoding="utf-8"))["train"]
    assert (recorded["augment_rate"], recorded["window_jitter"], recorded["decode_combine"]) == (0.15, 5, "sum")


def test_an_encoder_tagger_reads_the_unknown_token_as_its_unknown_subword(features, tmp_path):
    """punctuate's model family: the noisy words carry the tokenizer's own unknown token, which it reads as one
    unknown subword, and a training step on such a batch runs."""
    from corpus.labels import LABELS
    from embeddings.store import load_split, load_split_words
    from models import build_model
    from tests.fixture_checkpoints import make_checkpoint

    encoder = {"name": "encoder_tagger", "pretrained": str(make_checkpoint(tmp_path / "bert", "bert")), "layers": 1,
               "freeze_layers": 0, "label_subword": "last", "dropout": 0.0, "max_subwords": 128, "head": "linear",
               "head_hidden": 0}
    train = load_split(features, "train")
    model = build_model(encoder, num_labels=len(LABELS), vector_dim=int(train.vectors.shape[1]), vocab_size=10)
    config = TrainConfig.from_mapping({**TINY_TRAIN, "augment_rate": 0.15})
    tokens = TokenStore(train.vectors, train.ids, train.labels, words=load_split_words(features, "train"),
                        device=CPU, resident=False, noise=asr_noise(config, features, model))
    assert tokens.noise.unk_word == model.tokenizer.unk_token == "[UNK]"
    batch = cut_batch(tokens, np.array([0, 30, 60, 90]), 30)
    unknown = [i for row in batch["words"] for i, word in enumerate(row) if word == "[UNK]"]
    assert unknown and model.word_pieces([["[UNK]"]]) == [[[model.tokenizer.unk_token_id]]]
    loss = model.loss(batch)
    loss.backward()
    assert torch.isfinite(loss)
