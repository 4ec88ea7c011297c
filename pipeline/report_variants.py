"""DVC stage ``report_variants``: every architecture's runs on word, speech and combined inputs (reports/variants.md)."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from punctuation.params import load_params
from punctuation.reporting import collect_variants, load_published, variants_markdown


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--params", default="params.yaml")
    parser.add_argument("--metrics", default="metrics", help="parent of eval/, train/, eval_variants/, ...")
    parser.add_argument("--out", default="reports/variants.md")
    args = parser.parse_args(argv)
    params = load_params(args.params)
    metrics = Path(args.metrics)
    by_experiment = collect_variants(params.get("variants") or {}, params["active"]["experiments"],
                                     metrics / "eval", metrics / "train", metrics / "eval_variants",
                                     metrics / "train_variants")
    coverage = {"word": json.loads((metrics / "embedding_coverage.json").read_text(encoding="utf-8"))}
    for path in sorted((metrics / "feature_sets").glob("*.json")):
        coverage[path.stem] = json.loads(path.read_text(encoding="utf-8"))
    speech2vec_path = metrics / "speech2vec.json"
    speech2vec = json.loads(speech2vec_path.read_text(encoding="utf-8")) if speech2vec_path.exists() else None
    text = variants_markdown(params["profile"], by_experiment, load_published(), coverage, speech2vec,
                             params["audio"]["text"])
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(text, encoding="utf-8")
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
