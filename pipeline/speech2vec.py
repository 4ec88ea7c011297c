"""DVC stage ``speech2vec``: learn Speech2Vec from the aligned word segments and check what the vectors carry.

    python -m pipeline.speech2vec [--params params.yaml] [--acoustic data/acoustic] [--prepared data/prepared]
                                  [--out data/speech2vec] [--metrics metrics/speech2vec.json]
                                  [--report reports/speech2vec_report.md]

Reads the ``speech2vec`` section of params (fields of ``embeddings.speech2vec.Speech2VecConfig``) and the
word source of ``embed.word_source`` (the text vectors it is compared with). Writes the vectors
(``embeddings/speech2vec.py`` describes the files), the word-similarity and homophone figures of both
sources, and a short report.
"""

from __future__ import annotations

import argparse
import json
import logging
from pathlib import Path

from embeddings.evaluation import HOMOPHONES, compare_word_similarity, homophone_check, read_word_pairs, wordsim353_path
from embeddings.sources import load_word_vectors
from embeddings.speech2vec import SUMMARY_FILE, VECTORS_FILE, Speech2VecConfig, train_speech2vec
from punctuation.params import load_params, require


def _report(summary: dict, similarity: dict, homophones: dict) -> str:
    lines = ["# Speech2Vec", "",
             f"Trained on {summary['training_segments']:,} word segments ({summary['training_words']:,} word types "
             f"seen at least {summary['config']['min_count']} times) of the "
             f"{'/'.join(summary['config']['train_splits'])} audio in {summary['train_seconds']:.0f} s; "
             f"{summary['vocabulary']:,} type-level vectors of dimension {summary['config']['dim']}.", "",
             "Reconstruction error (MSE of standardised MFCCs) per epoch: "
             + ", ".join(f"{x:.3f}" for x in summary["epoch_losses"]), "",
             "## Per-occurrence vectors", "", "| split | tokens | with a vector |", "|---|---|---|"]
    for split, row in summary["occurrences"].items():
        lines.append(f"| {split} | {row['tokens']:,} | {row['tokens_with_vector']:,} |")
    lines += ["", "## Word similarity (WordSim-353, Spearman ρ)", "",
              f"{similarity['pairs']} pairs; 'common' = the {similarity['common_pairs']} pairs both sources cover.",
              "", "| source | covered pairs | ρ (own pairs) | ρ (common pairs) |", "|---|---|---|---|"]
    for name, row in similarity["sources"].items():
        lines.append(f"| {name} | {row['covered_pairs']} | {row['spearman_own']} | {row['spearman_common']} |")
    lines += ["", "## Homophones", "",
              "Cosine of homophone partners and the partner's rank among all words of the source's vocabulary "
              "(1 = nearest neighbour); random word pairs of the same vocabulary as the baseline.", "",
              "| source | covered pairs | mean cosine | random-pair cosine | median rank | rank ≤ 10 |",
              "|---|---|---|---|---|---|"]
    for name, row in homophones.items():
        lines.append(f"| {name} | {row['covered_pairs']} of {row['pairs']} | {row['mean_cosine']} | "
                     f"{row['random_pair_mean_cosine']} | {row['median_rank']} | {row['share_rank_within_10']} |")
    speech = homophones.get("speech2vec", {}).get("rows", [])
    if speech:
        lines += ["", "Speech2Vec pairs: " + ", ".join(f"{a}/{b} {r['cosine']:.2f} (rank {r['rank']})"
                                                        for r in speech for a, b in [r["pair"]])]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--params", default="params.yaml")
    parser.add_argument("--acoustic", default="data/acoustic")
    parser.add_argument("--prepared", default="data/prepared")
    parser.add_argument("--talks", default="data/audio/talks.tsv", help="talk boundaries (neighbours stay in a talk)")
    parser.add_argument("--out", default="data/speech2vec")
    parser.add_argument("--metrics", default="metrics/speech2vec.json")
    parser.add_argument("--report", default="reports/speech2vec_report.md")
    parser.add_argument("--score-only", action="store_true",
                        help="do not train: score the vectors already in --out (their training summary included), "
                        "e.g. against another word source")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")

    params = load_params(args.params)
    if args.score_only:
        summary_path = Path(args.out) / SUMMARY_FILE
        if not summary_path.exists():
            raise SystemExit(f"--score-only: {summary_path} not found (train the vectors first)")
        summary = json.loads(summary_path.read_text(encoding="utf-8"))
    else:
        config = Speech2VecConfig.from_dict(require(params, "speech2vec", "params"))
        summary = train_speech2vec(args.acoustic, args.prepared, args.out, config=config, talks_table=args.talks)

    from gensim.models import KeyedVectors

    speech = KeyedVectors.load_word2vec_format(str(Path(args.out) / VECTORS_FILE), binary=False)
    word = load_word_vectors(require(params["embed"], "word_source", "embed"))
    sources = {"speech2vec": speech}
    if word is not None:
        sources["word"] = word
        # the text vectors restricted to the words Speech2Vec knows, so that coverage does not decide the comparison
        restricted = KeyedVectors(vector_size=word.vector_size)
        shared = [w for w in speech.index_to_key if w in word.key_to_index]
        if shared:
            restricted.add_vectors(shared, word[shared])
            sources["word (speech2vec vocabulary)"] = restricted
    similarity = compare_word_similarity(sources, read_word_pairs(wordsim353_path()))
    homophones = {name: homophone_check(kv, HOMOPHONES) for name, kv in sources.items()}
    metrics = {**{k: summary[k] for k in ("training_segments", "training_words", "vocabulary", "train_seconds",
                                          "seconds", "epoch_losses", "occurrences")},
               "word_similarity": similarity,
               "homophones": {name: {k: v for k, v in row.items() if k != "rows"} for name, row in homophones.items()}}
    Path(args.metrics).parent.mkdir(parents=True, exist_ok=True)
    Path(args.metrics).write_text(json.dumps(metrics, indent=2) + "\n", encoding="utf-8")
    text = _report(summary, similarity, homophones)
    Path(args.report).parent.mkdir(parents=True, exist_ok=True)
    Path(args.report).write_text(text, encoding="utf-8")
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
