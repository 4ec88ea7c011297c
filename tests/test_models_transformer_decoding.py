"""The Transformer's greedy decoding (GPU runs): preallocated self-attention key/value caches written in place, the
memory's cross-attention keys/values projected once per batch, one position table. It must decode exactly what
the decoding it replaced decoded: that algorithm (per-layer dict caches grown by concatenation, the cross-attention
keys/values projected at the first position, the positions recomputed at every step) is kept below as the
reference, over the model's own modules, and compared label for label on random models, every setting, padded
batches."""

from __future__ import annotations

import collections
import itertools
import math

import pytest
import torch
from torch.utils._python_dispatch import TorchDispatchMode

from models import build_model
from models.blocks import causal_mask, sinusoidal_positions

SMALL = {"name": "transformer", "d_model": 32, "heads": 4, "ffn": 64, "encoder_layers": 2, "decoder_layers": 2,
         "dropout": 0.1, "aligned_memory": True, "input_scale": 1.0, "relative_window": 0}
NUM_LABELS = 4


# -- the decoding before the preallocated caches, verbatim but for `self` --------------------------------------------

def _old_attention(attention, query, key_value, *, key_mask=None, attention_mask=None, cache=None, static_kv=False):
    q = attention._split(attention.query(query)) / math.sqrt(attention.head_dim)
    if cache is not None and static_kv and "k" in cache:
        k, v = cache["k"], cache["v"]
    else:
        k, v = attention._split(attention.key(key_value)), attention._split(attention.value(key_value))
        if cache is not None and not static_kv and "k" in cache:
            k = torch.cat([cache["k"], k], dim=2)
            v = torch.cat([cache["v"], v], dim=2)
        if cache is not None:
            cache["k"], cache["v"] = k, v
    scores = q @ k.transpose(-1, -2)
    if attention.head_mixing is not None:
        scores = scores + torch.einsum("hg,bgqk->bhqk", attention.head_mixing, scores)
    if key_mask is not None:
        scores = scores.masked_fill(~key_mask[:, None, None, :], float("-inf"))
    if attention_mask is not None:
        scores = scores.masked_fill(~attention_mask, float("-inf"))
    weights = torch.nan_to_num(torch.softmax(scores, dim=-1), nan=0.0)
    attended = attention.dropout(weights) @ v
    batch, _, length, _ = attended.shape
    return attention.output(attended.transpose(1, 2).reshape(batch, length, attention.dim))


def _old_decoder_layer(layer, x, memory, memory_mask, cache):
    read = layer.after_self_attention.inputs(x)
    if cache is None:
        attended = _old_attention(layer.self_attention, read, read,
                                  attention_mask=causal_mask(x.size(1), device=x.device))
    else:
        attended = _old_attention(layer.self_attention, read, read, cache=cache.setdefault("self", {}))
    x = layer.after_self_attention(x, attended)
    cross_cache = None if cache is None else cache.setdefault("cross", {})
    attended = _old_attention(layer.cross_attention, layer.after_cross_attention.inputs(x), memory,
                              key_mask=memory_mask, cache=cross_cache, static_kv=True)
    x = layer.after_cross_attention(x, attended)
    return layer.after_feed_forward(x, layer.feed_forward(layer.after_feed_forward.inputs(x)))


def _old_positions(encoding, x, start):
    if encoding.table is None:
        table = sinusoidal_positions(start + x.size(1), encoding.dim, device=x.device)[start:]
    else:
        if start + x.size(1) > encoding.table.num_embeddings:
            raise ValueError("learned position table too short")
        table = encoding.table.weight[start:start + x.size(1)]
    return encoding.dropout(x + table.unsqueeze(0))


def _old_decode(model, previous_labels, memory, memory_mask, caches, start):
    x = model.label_embedding(previous_labels)
    if model.aligned_memory:
        x = x + memory[:, start:start + x.size(1)]
    x = _old_positions(model.decoder_positions, x, start)
    for i, layer in enumerate(model.decoder):
        x = _old_decoder_layer(layer, x, memory, memory_mask, caches[i])
    return model.classifier(x if model.decoder_norm is None else model.decoder_norm(x))


@torch.no_grad()
def old_predict(model, batch):
    memory = model.encode(batch)
    batch_size, length = batch["mask"].shape
    caches = [{} for _ in model.decoder]
    previous = torch.full((batch_size, 1), model.start_label, dtype=torch.long, device=memory.device)
    predicted = []
    for position in range(length):
        logits = _old_decode(model, previous, memory, batch["mask"], caches, start=position)
        previous = logits[:, -1].argmax(dim=-1, keepdim=True)
        predicted.append(previous)
    return torch.cat(predicted, dim=1)


# -- tests ---------------------------------------------------------------------------------------------------------

def random_model(seed: int, **changes):
    """A random model whose labels vary from position to position (its weights scaled up, so that no label
    dominates everywhere): greedy decoding then feeds back labels that differ, as a trained model's do."""
    torch.manual_seed(seed)
    model = build_model({**SMALL, **changes}, num_labels=NUM_LABELS, vector_dim=12, vocab_size=30).eval()
    with torch.no_grad():
        model.label_embedding.weight.mul_(3.0)
        model.classifier.linear.weight.mul_(4.0)
    return model


def padded_batch(seed: int, rows: int = 6, length: int = 11) -> dict:
    """Rows of every length down to one real token, one row wholly padding (cross-attention over no key)."""
    generator = torch.Generator().manual_seed(seed)
    lengths = [length, length, 7, 3, 1, 0][:rows]
    mask = torch.arange(length)[None, :] < torch.tensor(lengths)[:, None]
    return {"vectors": torch.randn(rows, length, 12, generator=generator),
            "ids": torch.randint(1, 30, (rows, length), generator=generator), "mask": mask}


SETTINGS = [dict(norm=norm, aligned_memory=aligned, learned_positions=learned, relative_window=window)
            for norm, aligned, learned, window in itertools.product(("post", "pre"), (True, False), (0, 16), (0, 3))]


@pytest.mark.parametrize("changes", SETTINGS, ids=lambda c: "-".join(f"{k}={v}" for k, v in c.items()))
def test_decoding_gives_the_labels_of_the_decoding_it_replaced(changes):
    seen = set()
    for seed in range(3):
        model = random_model(seed, **changes)
        for batch_seed in range(2):
            batch = padded_batch(10 * seed + batch_seed)
            new, old = model.predict(batch), old_predict(model, batch)
            assert new.dtype == old.dtype == torch.long and new.shape == old.shape == batch["mask"].shape
            assert torch.equal(new, old), (changes, seed, batch_seed)
            seen.update(new[batch["mask"]].tolist())
    assert len(seen) > 1  # labels that vary: a label decoded differently would change the ones after it


def test_the_reference_can_tell_a_different_decoding_apart():
    """The comparison above is not vacuous: the reference decodes other labels once one weight changes."""
    model, batch = random_model(0), padded_batch(0)
    before = old_predict(model, batch)
    with torch.no_grad():
        model.decoder[0].self_attention.value.bias.add_(1.0)
    assert not torch.equal(old_predict(model, batch), before)
    assert torch.equal(model.predict(batch), old_predict(model, batch))


def test_decoding_at_paper_width_on_a_long_window():
    """Wider layers and the evaluate stage's window of 100 tokens (more positions fed back)."""
    torch.manual_seed(5)
    model = build_model({**SMALL, "d_model": 128, "heads": 8, "ffn": 256, "encoder_layers": 2, "decoder_layers": 3,
                         "relative_window": 8}, num_labels=NUM_LABELS, vector_dim=12, vocab_size=30).eval()
    with torch.no_grad():
        model.classifier.linear.weight.mul_(4.0)
    batch = padded_batch(7, rows=5, length=100)
    batch["mask"][2, 40:] = False
    assert torch.equal(model.predict(batch), old_predict(model, batch))


def test_each_position_launches_the_same_operators_and_waits_for_nothing():
    """No tensor grows by concatenation per position (one `cat` at the end), the sinusoids are computed once for
    the encoder and once for the decoder, no operator the host must wait for, and every further position adds the
    same operators."""
    model = random_model(0)

    class Count(TorchDispatchMode):  # aten operators by name (as paper_runs.step_ops counts them)
        def __init__(self):
            super().__init__()
            self.by_name = collections.Counter()

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            self.by_name[func.overloadpacket.__name__] += 1
            return func(*args, **(kwargs or {}))

    def count(length: int) -> collections.Counter:
        counter = Count()
        with counter:
            model.predict(padded_batch(0, length=length))
        return counter.by_name

    short, middle, long = count(6), count(9), count(12)
    waits = ("_local_scalar_dense", "nonzero", "item", "is_nonzero", "masked_select")
    assert not any(counts[name] for counts in (short, middle, long) for name in waits)
    assert long["cat"] == 1 and long["sin"] == long["cos"] == 2
    assert {name: middle[name] - short[name] for name in middle} == {name: long[name] - middle[name] for name in long}


def test_teacher_forcing_is_unchanged_by_the_decoding_api():
    """`forward` (training) is the old teacher-forced computation to the bit."""
    for changes in SETTINGS:
        model = random_model(1, **changes)
        batch = {**padded_batch(3), "labels": torch.randint(0, NUM_LABELS, (6, 11))}
        start = torch.full_like(batch["labels"][:, :1], model.start_label)
        previous = torch.cat([start, batch["labels"][:, :-1]], dim=1)
        with torch.no_grad():
            memory = model.encode(batch)
            x = model.label_embedding(previous)
            if model.aligned_memory:
                x = x + memory[:, :x.size(1)]
            x = _old_positions(model.decoder_positions, x, 0)
            for layer in model.decoder:
                x = _old_decoder_layer(layer, x, memory, batch["mask"], None)
            old = model.classifier(x if model.decoder_norm is None else model.decoder_norm(x))
            assert torch.equal(model(batch), old), changes


def test_autocast_decoding_keeps_the_projections_dtype():
    """Under bf16 autocast (the trainer's dev evaluation on a GPU) the caches take the projections' dtype, as the
    concatenated ones did, and the labels are the old decoding's."""
    model, batch = random_model(2), padded_batch(2)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        new, old = model.predict(batch), old_predict(model, batch)
        state = model.decoder[0].start_decoding(model.encode(batch), 11)
    assert torch.equal(new, old)
    assert state["self"][0].dtype == state["cross"][0].dtype == torch.bfloat16
