"""Where the speech model's cue value comes from on Earnings-22 dev: each comparison's B - A within the calls that
are mostly timed and within the mostly untimed rest.

    python scripts/earnings22_cues_by_timed_share.py --specs comparisons/specs/NAME.yaml [...]
        [--split earnings22_dev_timed] [--calls data/earnings22/calls/dev] [--results reports/comparisons]
        [--out reports/earnings22_cues_by_timed_share]

A timing cue can only help where a word has a time, and Earnings-22's calls are far apart: the aligner timed most
words of some and few of others. The calls are split at the data report's own threshold
(:data:`realspeech.earnings22.MOSTLY_UNTIMED`, :func:`realspeech.earnings22.timed_call_groups`, read from the
calls as ``punctuate`` takes them). Each comparison's finished results (its per-talk confusions under
``--results``) are pooled per group by :func:`comparisons.report.group_gains`: nothing is trained or labelled
again. Reporting only, on a dev split: no keep rule reads it, and no test split is read. Writes ``OUT.md`` and
``OUT.json``.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from experiments.numerics import pin_numerics  # noqa: E402

pin_numerics()  # the pipeline's numerics, before numpy loads (experiments/numerics.py)

from comparisons.ab import read_results  # noqa: E402
from comparisons.bootstrap import split_talks  # noqa: E402
from comparisons.report import group_gains  # noqa: E402
from comparisons.spec import load_spec  # noqa: E402
from corpus.io import atomic_write_text  # noqa: E402
from realspeech.earnings22 import timed_call_groups  # noqa: E402


def cues_by_timed_share(specs: list[Path], split: str, calls_dir: Path, results_dir: Path) -> dict[str, Any]:
    """Per comparison, :func:`comparisons.report.group_gains` over the split's calls grouped by timed share."""
    figures: dict[str, Any] = {"split": split, "calls": str(calls_dir), "specs": [str(path) for path in specs],
                               "comparisons": {}}
    for path in specs:
        spec = load_spec(path)
        if split not in spec.talks:
            raise ValueError(f"{path}: split {split!r} has no talks file in this spec")
        talks = split_talks(spec.split_files[split], talks_tsv=spec.talks[split], pseudo_talk_tokens=0)
        groups = timed_call_groups(calls_dir, [talk.talk_id for talk in talks])
        figures["comparisons"][spec.name] = group_gains(spec, read_results(spec, results_dir), split, groups)
    return figures


def markdown(figures: dict[str, Any]) -> str:
    first = next(iter(figures["comparisons"].values()))
    groups = list(first["groups"])
    lines = ["# Earnings-22 dev: the cues' value by the calls' timed share", "",
             f"Written by `python scripts/earnings22_cues_by_timed_share.py --specs {' '.join(figures['specs'])}` "
             f"from each comparison's finished results on `{figures['split']}` (per-talk confusions; nothing trained "
             "or labelled again). The calls of "
             f"`{figures['calls']}` are grouped by the share of their words with a time. F1 in points, "
             "micro-averaged over COMMA, PERIOD, QUESTION, pooled over each group's calls. Reporting only: no keep "
             "rule reads it. No test split is read.", "",
             "| comparison | " + " | ".join(
                 f"{group} ({first['groups'][group]['talks']} calls, {first['groups'][group]['tokens']:,} tokens)"
                 for group in groups) + " |",
             "|---|" + "---|" * len(groups)]
    for name, result in figures["comparisons"].items():
        cells = []
        for group in groups:
            row = result["groups"][group]
            boot = row["bootstrap"]
            cells.append(f"{row['mean_gain']:+.2f} ({boot['low']:+.2f} to {boot['high']:+.2f}; seeds "
                         + ", ".join(f"{g:+.2f}" for g in row["gains"]) + ")")
        lines.append(f"| [{name}](comparisons/{name}.md) | " + " | ".join(cells) + " |")
    lines += ["", "- Each cell: B − A, the mean over the seeds; the paired bootstrap's 95 % interval over that "
              "group's calls; each seed's gain.",
              "- B is the speech model, A its label-free control (each spec says what differs).", ""]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--specs", nargs="+", type=Path, required=True, help="comparisons/specs/NAME.yaml")
    parser.add_argument("--split", default="earnings22_dev_timed", help="a decision split with a talks file")
    parser.add_argument("--calls", type=Path, default=Path("data/earnings22/calls/dev"),
                        help="the split's calls as punctuate takes them (the prepare_earnings22 stage)")
    parser.add_argument("--results", type=Path, default=Path("reports/comparisons"),
                        help="where the comparisons' results are (their --out)")
    parser.add_argument("--out", type=Path, default=Path("reports/earnings22_cues_by_timed_share"))
    args = parser.parse_args(argv)
    figures = cues_by_timed_share(args.specs, args.split, args.calls, args.results)
    report = markdown(figures)
    for suffix, text in ((".json", json.dumps(figures, indent=1) + "\n"), (".md", report)):
        atomic_write_text(args.out.with_suffix(suffix), text)
    print(report)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
