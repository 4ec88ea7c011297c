"""The training set from params' ``data`` section (the prepare stage's and the longer draws' one reading of it)."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from trainset.prepare import PreparedData, prepare_data


def prepare_from_params(data: Mapping[str, Any], out_dir: str | Path, *,
                        train_tokens: int | None = None) -> PreparedData:
    """:func:`prepare_data` with the settings of params' ``data`` section (``train_tokens`` its own unless given); a
    missing setting is an error naming it (``data.KEY``)."""
    from experiments.params import require

    def setting(key: str) -> Any:
        return require(data, key, "data")

    return prepare_data(
        setting("iwslt_dir"), setting("ted_talks"), out_dir,
        eval_splits=setting("eval_splits"),
        train_tokens=int(train_tokens if train_tokens is not None else setting("train_tokens")),
        overlap_ngram=int(setting("overlap_ngram")),
        overlap_min_shared_fraction=float(setting("overlap_min_shared_fraction")),
        seed=int(setting("seed")),
        excluded_talks=list(data.get("excluded_talks") or []),
        real_speech={talk: Path(setting("real_speech_dir")) / f"{talk}.ref.tsv"
                     for talk in data.get("real_speech_talks") or []},
    )
