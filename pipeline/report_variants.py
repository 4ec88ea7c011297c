"""DVC stage ``report_variants``: every architecture's runs on word, speech and combined inputs.

    python -m pipeline.report_variants [--params params.yaml] [--metrics metrics] [--out reports/variants.md]
"""

from __future__ import annotations

from pathlib import Path

from corpus.io import atomic_write_text
from experiments.params import runs_on_feature_sets
from pipeline.stage import option, read_json, stage_parser, start
from reporting.results import collect_variants, load_published, variants_markdown


def main(argv: list[str] | None = None) -> int:
    parser = stage_parser("pipeline.report_variants", __doc__, out="reports/variants.md")
    option(parser, "--metrics", "metrics", "parent of eval/, train/, eval_variants/, ...")
    args, params = start(parser, argv)
    metrics = Path(args.metrics)
    by_experiment = collect_variants(runs_on_feature_sets(params), params["active"]["experiments"],
                                     metrics / "eval", metrics / "train", metrics / "eval_variants",
                                     metrics / "train_variants")
    coverage = {"word": read_json(metrics / "embedding_coverage.json")}
    for path in sorted((metrics / "feature_sets").glob("*.json")):
        coverage[path.stem] = read_json(path)
    speech2vec = read_json(metrics / "speech2vec.json", missing_ok=True)
    text = variants_markdown(params["profile"], by_experiment, load_published(), coverage, speech2vec,
                             params["audio"]["text"])
    atomic_write_text(args.out, text)
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
