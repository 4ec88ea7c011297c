"""Shared test helpers for the model tests."""

from __future__ import annotations

import torch


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


def overfit_accuracy(model, batch: dict[str, torch.Tensor], steps: int, lr: float = 1e-2) -> float:
    """Train ``model`` on one batch for ``steps`` Adam steps; return its accuracy on the real tokens."""
    optimizer = torch.optim.Adam(model.parameters(), lr=lr)
    for _ in range(steps):
        optimizer.zero_grad()
        model.loss(batch).backward()
        optimizer.step()
    model.eval()
    return (model.predict(batch) == batch["labels"])[batch["mask"]].float().mean().item()
