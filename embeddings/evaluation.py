"""What word vectors carry: word-similarity correlation and a homophone check.

* **Word similarity**: Spearman (and Pearson) correlation between cosine similarities and human ratings on
  WordSim-353 (the copy gensim ships with its test data), over the pairs whose two words the vectors cover.
  Comparing two sources fairly means scoring both on the *same* pairs: :func:`compare_word_similarity` does.
* **Homophones**: words that sound the same but mean different things (``write``/``right``). Vectors made
  from sound should put them close; vectors made from text should not. For each covered pair we report the
  cosine similarity and the rank of the partner among all words of the vocabulary by similarity (1 = nearest
  neighbour), next to the cosine of random word pairs of the same vocabulary as a baseline.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Sequence

import numpy as np

#: Common English homophone pairs that the benchmark's lower-cased tokens can contain.
HOMOPHONES: tuple[tuple[str, str], ...] = (
    ("write", "right"), ("two", "too"), ("to", "two"), ("there", "their"), ("know", "no"), ("hear", "here"),
    ("whole", "hole"), ("one", "won"), ("for", "four"), ("by", "buy"), ("new", "knew"), ("see", "sea"),
    ("son", "sun"), ("wait", "weight"), ("way", "weigh"), ("meet", "meat"), ("peace", "piece"),
    ("break", "brake"), ("be", "bee"), ("eye", "i"), ("week", "weak"), ("would", "wood"), ("which", "witch"),
    ("whether", "weather"), ("where", "wear"), ("mail", "male"), ("made", "maid"), ("plane", "plain"),
    ("road", "rode"), ("sale", "sail"), ("scene", "seen"), ("tail", "tale"), ("through", "threw"),
    ("wear", "ware"), ("flower", "flour"), ("hour", "our"), ("night", "knight"), ("not", "knot"),
    ("pair", "pear"), ("red", "read"), ("rain", "reign"), ("real", "reel"), ("role", "roll"),
    ("sight", "site"), ("some", "sum"), ("steal", "steel"), ("sole", "soul"), ("their", "they're"),
    ("its", "it's"), ("whose", "who's"), ("your", "you're"), ("aloud", "allowed"), ("cell", "sell"),
    ("die", "dye"), ("fair", "fare"), ("higher", "hire"), ("idle", "idol"), ("principal", "principle"),
)


def wordsim353_path() -> Path:
    """WordSim-353 as shipped in gensim's test data (tab-separated ``word1 word2 score``, ``#`` comments)."""
    from gensim.test.utils import datapath

    path = Path(datapath("wordsim353.tsv"))
    if not path.is_file():
        raise FileNotFoundError(f"{path}: gensim's copy of WordSim-353 is missing")
    return path


def read_word_pairs(path: str | Path) -> list[tuple[str, str, float]]:
    pairs = []
    for number, line in enumerate(Path(path).read_text(encoding="utf-8").splitlines(), start=1):
        if not line.strip() or line.startswith("#"):
            continue
        cells = line.split("\t")
        if len(cells) < 3:
            raise ValueError(f"{path}:{number}: expected 'word1<TAB>word2<TAB>score', got {line!r}")
        try:
            pairs.append((cells[0].lower(), cells[1].lower(), float(cells[2])))
        except ValueError:
            raise ValueError(f"{path}:{number}: score {cells[2]!r} is not a number") from None
    return pairs


def _cosine(kv: Any, a: str, b: str) -> float:
    return float(kv.similarity(a, b))


def _spearman(x: Sequence[float], y: Sequence[float]) -> float:
    from scipy.stats import spearmanr

    return float(spearmanr(x, y).statistic)


def _pearson(x: Sequence[float], y: Sequence[float]) -> float:
    from scipy.stats import pearsonr

    return float(pearsonr(x, y).statistic)


def compare_word_similarity(sources: dict[str, Any], pairs: Sequence[tuple[str, str, float]]) -> dict[str, Any]:
    """Correlations of each source on its own covered pairs, and of all sources on the pairs every one covers."""
    result: dict[str, Any] = {"pairs": len(pairs), "sources": {}}
    common = [p for p in pairs if all(p[0] in kv.key_to_index and p[1] in kv.key_to_index for kv in sources.values())]
    result["common_pairs"] = len(common)
    for name, kv in sources.items():
        own = [p for p in pairs if p[0] in kv.key_to_index and p[1] in kv.key_to_index]
        entry: dict[str, Any] = {"covered_pairs": len(own), "coverage": round(len(own) / max(len(pairs), 1), 4)}
        for label, subset in (("own", own), ("common", common)):
            if len(subset) >= 3:
                sims = [_cosine(kv, a, b) for a, b, _ in subset]
                human = [s for _, _, s in subset]
                entry[f"spearman_{label}"] = round(_spearman(sims, human), 4)
                entry[f"pearson_{label}"] = round(_pearson(sims, human), 4)
            else:
                entry[f"spearman_{label}"] = entry[f"pearson_{label}"] = None
        result["sources"][name] = entry
    return result


def homophone_check(kv: Any, pairs: Sequence[tuple[str, str]] = HOMOPHONES, *, random_pairs: int = 2000,
                    seed: int = 0) -> dict[str, Any]:
    """Similarity and neighbour rank of homophone partners, with a random-pair baseline."""
    covered = [(a, b) for a, b in pairs if a in kv.key_to_index and b in kv.key_to_index and a != b]
    vectors = kv.get_normed_vectors()
    rows = []
    for a, b in covered:
        sims = vectors @ vectors[kv.key_to_index[a]]
        partner = sims[kv.key_to_index[b]]
        rank = int((sims > partner).sum())  # the word itself has sim 1 and is above; rank 1 = nearest other word
        rows.append({"pair": [a, b], "cosine": round(float(partner), 4), "rank": rank})
    rng = np.random.default_rng(seed)
    n = len(vectors)
    if n >= 2:
        i, j = rng.integers(n, size=random_pairs), rng.integers(n, size=random_pairs)
        keep = i != j
        baseline = float(np.mean(np.sum(vectors[i[keep]] * vectors[j[keep]], axis=1)))
    else:
        baseline = None
    cosines = [r["cosine"] for r in rows]
    ranks = [r["rank"] for r in rows]
    return {
        "pairs": len(pairs),
        "covered_pairs": len(rows),
        "vocabulary": n,
        "mean_cosine": round(float(np.mean(cosines)), 4) if rows else None,
        "random_pair_mean_cosine": None if baseline is None else round(baseline, 4),
        "median_rank": float(np.median(ranks)) if rows else None,
        "share_rank_within_10": round(float(np.mean([r <= 10 for r in ranks])), 4) if rows else None,
        "rows": rows,
    }
