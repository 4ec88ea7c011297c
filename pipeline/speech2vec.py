"""DVC stage ``speech2vec``: learn Speech2Vec from the aligned word segments and check what the vectors carry.

    python -m pipeline.speech2vec [--params params.yaml] [--acoustic data/acoustic] [--prepared data/prepared]
                                  [--out data/speech2vec] [--metrics metrics/speech2vec.json]
                                  [--report reports/speech2vec_report.md]
                                  [--paper-coverage reports/paper_speech2vec/coverage.json]

Reads the ``speech2vec`` section of params (fields of ``embeddings.speech2vec.Speech2VecConfig``) and the
word source of ``embed.word_source`` (the text vectors it is compared with). Writes the vectors
(``embeddings/speech2vec.py`` describes the files), the word-similarity and homophone figures of both
sources, and a short report.
"""

from __future__ import annotations

from pathlib import Path

from corpus.io import atomic_write_text
from embeddings.evaluation import HOMOPHONES, compare_word_similarity, homophone_check, read_word_pairs, wordsim353_path
from embeddings.sources import load_word_vectors
from embeddings.speech2vec import SUMMARY_FILE, VECTORS_FILE, Speech2VecConfig, train_speech2vec
from experiments.params import require
from pipeline.stage import option, read_json, stage_parser, start, write_metrics


def _report(summary: dict, similarity: dict, homophones: dict) -> str:
    lines = ["# Speech2Vec", "",
             f"Trained on {summary['training_segments']:,} word segments ({summary['training_words']:,} word types "
             f"seen at least {summary['config']['min_count']} times) of the "
             f"{'/'.join(summary['config']['train_splits'])} audio; "
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


def _paper_coverage_section(coverage: dict, default_vocabulary: int) -> str:
    """The vocabulary coverage of the paper runs' Speech2Vec (``python -m paper_runs speech2vec`` writes
    ``coverage``; it is built once, outside this stage, from synthetic audio of sentences chosen for their words)."""
    selection = coverage["selection"]
    return "\n".join([
        "", "## The paper runs' Speech2Vec: vocabulary coverage", "",
        "The `paper` profile's speech and word+speech inputs read another Speech2Vec (`gpu_kit.speech2vec_dir`), "
        "learned the same way from synthetic audio of training sentences chosen to cover the training set's word "
        "types (`python -m paper_runs speech2vec`; paper_runs/README.md). From "
        "`reports/paper_speech2vec/coverage.json`:", "",
        "| | |", "|---|---|",
        f"| training tokens / word types | {selection['training_tokens']:,} / {selection['training_types']:,} |",
        f"| types targeted (the most frequent, together {100 * selection['share_of_tokens_targeted']:.1f} % of the "
        f"tokens), each to occur {selection['min_count']} times | {selection['types_targeted']:,} |",
        f"| sentences / tokens chosen | {selection['chosen_sentences']:,} / {selection['chosen_tokens']:,} |",
        f"| synthetic audio | {coverage['pseudo_talks']} pseudo-talks, {coverage['audio_hours']:.1f} h, "
        f"{100 * coverage['share_aligned']:.1f} % of the tokens aligned |",
        f"| type-level vectors | {coverage['vocabulary']:,} (of the targeted types: "
        f"{coverage['targeted_types_with_vector']:,}) |",
        "| **training tokens whose type has a vector** | "
        f"**{100 * coverage['share_of_training_tokens_with_vector']:.1f} %** |",
        "", f"The default pipeline's Speech2Vec above knows {default_vocabulary:,} types.", ""])


def main(argv: list[str] | None = None) -> int:
    parser = stage_parser("pipeline.speech2vec", __doc__, out="data/speech2vec", metrics="metrics/speech2vec.json",
                          prepared=True)
    option(parser, "--acoustic", "data/acoustic", "output of the features stage")
    option(parser, "--talks", "data/audio/talks.tsv", "talk boundaries (neighbours stay in a talk)")
    option(parser, "--report", "reports/speech2vec_report.md", "Markdown report")
    parser.add_argument("--paper-coverage", help="coverage.json of the paper runs' Speech2Vec: its section of the "
                        "report (reports/paper_speech2vec/coverage.json)")
    parser.add_argument("--score-only", action="store_true",
                        help="do not train: score the vectors already in --out (their training summary included), "
                        "e.g. against another word source")
    args, params = start(parser, argv, log=True)

    if args.score_only:
        summary_path = Path(args.out) / SUMMARY_FILE
        if not summary_path.exists():
            raise SystemExit(f"--score-only: {summary_path} not found (train the vectors first)")
        summary = read_json(summary_path)
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
    # the training's wall time is in the returned summary only (not in the summary file DVC hashes); write_metrics
    # moves it to the stage's timings record
    metrics = {**{k: summary[k] for k in ("training_segments", "training_words", "vocabulary", "train_seconds",
                                          "seconds", "epoch_losses", "occurrences") if k in summary},
               "word_similarity": similarity,
               "homophones": {name: {k: v for k, v in row.items() if k != "rows"} for name, row in homophones.items()}}
    write_metrics(args.metrics, metrics)
    text = _report(summary, similarity, homophones)
    if args.paper_coverage:
        text += _paper_coverage_section(read_json(args.paper_coverage), summary["vocabulary"])
    atomic_write_text(args.report, text)
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
