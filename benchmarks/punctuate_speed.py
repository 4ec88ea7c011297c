"""``punctuate`` as a user runs it: start-up time, words/s and peak memory on a long transcript, per model.

    python -m benchmarks.punctuate_speed [--params params.yaml] [--model DIR ...] [--words 200000]
                                         [--text FILE] [--repeats 3] [--json OUT]

Every figure comes from a fresh ``python -m inference.cli`` process, exactly what a ``punctuate`` call costs
(interpreter start, imports, model and vectors loaded, the text read, punctuated and written):

* ``start_s``: the best of ``--repeats`` calls on one sentence, beside ``torch_import_s``, the best of as many
  ``python -c "import torch"`` (the floor any torch program pays), and their ratio ``start_vs_torch``;
* ``wall_s``, ``words_per_s`` (start-up included) and ``words_per_s_after_start`` (``wall_s - start_s``
  taken off), and ``peak_rss_mb`` (the process's maximum resident set, from ``wait4``) on ``--words`` words.

The targets (:data:`TARGETS`: what a user should get from the default models on 2 CPU cores) are printed
beside each figure: at least 2,000 words/s on 200,000 words, start-up included; at most 1.5 GB peak memory; a
one-sentence call at most 2.5 times a bare ``import torch``.

The models are ``--model`` directories, or by default those ``punctuate`` uses (``punctuate.text_model`` and
``punctuate.audio_model`` of the params; the audio model reads text alone here: every timing cue missing), or,
without that section, ``artifacts/<experiment>/model`` of every experiment in ``experiments``. The text is the
first ``--words`` tokens of ``--text`` (an IWSLT ``word<TAB>LABEL`` file; default ``data/prepared/dev.tsv``,
repeated if shorter), 20 words a line; without it, a fixed pseudo-text of common words. Nothing is asserted.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from experiments.numerics import pin_numerics  # noqa: E402

pin_numerics()  # the pipeline's numerics, before numpy or torch loads (experiments/numerics.py)

REPO = Path(__file__).resolve().parents[1]
#: figure -> (comparison, bound): what a default model must do here
TARGETS = {"words_per_s": (">=", 2000), "peak_rss_mb": ("<=", 1536), "start_vs_torch": ("<=", 2.5)}
SENTENCE = "so i went down to the river and the water was cold\n"
WORDS_PER_LINE = 20
#: The pseudo-text when no prepared split is at hand (the speed of a model hardly depends on which words).
FALLBACK_WORDS = ("the of and to a in that it is i you we this so was for they on with but what be not have are "
                  "people one about all there like can just know do n't think if very world when can time now "
                  "go going because how our then make more me way see these really years").split()


def run_timed(command: list[str], *, stdin: bytes = b"", cwd: Path = REPO) -> tuple[float, int, bytes, bytes]:
    """``(wall seconds, peak RSS in bytes, stdout, stderr)`` of one process (peak RSS from ``wait4``)."""
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err, tempfile.TemporaryFile() as given:
        given.write(stdin)
        given.seek(0)
        started = time.perf_counter()
        process = subprocess.Popen(command, cwd=cwd, stdin=given, stdout=out, stderr=err)
        _, status, usage = os.wait4(process.pid, 0)
        wall = time.perf_counter() - started
        process.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        err.seek(0)
        stdout, stderr = out.read(), err.read()
    if process.returncode != 0:
        tail = stderr.decode(errors="replace")[-2000:]
        raise RuntimeError(f"{' '.join(command)} exited {process.returncode}: {tail}")
    return wall, usage.ru_maxrss * 1024, stdout, stderr


def best_of(repeats: int, command: list[str], stdin: bytes = b"") -> float:
    return min(run_timed(command, stdin=stdin)[0] for _ in range(max(1, repeats)))


def benchmark_text(words: int, source: Path | None) -> str:
    """``words`` words, 20 a line: the first tokens of an IWSLT file (repeated), or the fallback pseudo-text."""
    tokens: list[str] = []
    if source is not None and source.is_file():
        from corpus.iwslt import read_iwslt

        tokens = list(read_iwslt(source).words)
    if not tokens:
        tokens = list(FALLBACK_WORDS)
    picked = (tokens * (words // len(tokens) + 1))[:words]
    return "".join(" ".join(picked[i:i + WORDS_PER_LINE]) + "\n" for i in range(0, len(picked), WORDS_PER_LINE))


def default_models(params_path: Path) -> list[Path]:
    """The directories ``punctuate`` uses by default (params ``punctuate``), else every experiment's model."""
    from experiments.params import load_params

    params = load_params(params_path)
    section = params.get("punctuate") or {}
    named = [section[key] for key in ("text_model", "audio_model") if section.get(key)]
    if named:
        return [Path(path) for path in named]
    return [Path("artifacts") / name / "model" for name in params["experiments"]]


def punctuate_figures(model: Path, text_file: Path, words: int, repeats: int, torch_import_s: float) -> dict[str, Any]:
    command = [sys.executable, "-m", "inference.cli", "--model", str(model)]
    start_s = best_of(repeats, command, SENTENCE.encode())
    wall_s, peak, _, _ = run_timed(command + [str(text_file), "-o", os.devnull])
    return {
        "model": str(model), "words": words, "start_s": round(start_s, 3), "torch_import_s": round(torch_import_s, 3),
        "start_vs_torch": round(start_s / torch_import_s, 2), "wall_s": round(wall_s, 2),
        "words_per_s": round(words / wall_s), "words_per_s_after_start": round(words / max(wall_s - start_s, 1e-9)),
        "peak_rss_mb": round(peak / 2**20),
    }


def verdict(figures: dict[str, Any]) -> str:
    """Each target with ``met`` or ``MISSED`` (see :data:`TARGETS`)."""
    out = []
    for key, (comparison, bound) in TARGETS.items():
        value = figures[key]
        met = value >= bound if comparison == ">=" else value <= bound
        out.append(f"{key} {comparison} {bound:,} {'met' if met else 'MISSED'}")
    return "; ".join(out)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.punctuate_speed", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--params", default="params.yaml")
    parser.add_argument("--model", action="append", help="model directory (repeatable; default: punctuate's models)")
    parser.add_argument("--words", type=int, default=200_000)
    parser.add_argument("--text", default="data/prepared/dev.tsv", help="IWSLT file whose words are punctuated")
    parser.add_argument("--repeats", type=int, default=3, help="one-sentence calls (and torch imports) per figure")
    parser.add_argument("--json", help="also write the figures here (a JSON list)")
    args = parser.parse_args(argv)

    models = [Path(m) for m in args.model] if args.model else default_models(REPO / args.params)
    models = [m if m.is_absolute() else REPO / m for m in models]
    torch_import_s = best_of(args.repeats, [sys.executable, "-c", "import torch"])
    print(f"python -c 'import torch': {torch_import_s:.2f} s (best of {args.repeats})")
    results = []
    with tempfile.TemporaryDirectory() as scratch:
        text_file = Path(scratch) / "transcript.txt"
        text_file.write_text(benchmark_text(args.words, REPO / args.text), encoding="utf-8")
        for model in models:
            if not (model / "config.json").is_file():
                print(f"{model}: skipped (no trained model; run `dvc repro` first)")
                continue
            figures = punctuate_figures(model, text_file, args.words, args.repeats, torch_import_s)
            results.append(figures)
            print(f"{model}: start {figures['start_s']:.2f} s ({figures['start_vs_torch']:.2f}x import torch); "
                  f"{args.words:,} words in {figures['wall_s']:.1f} s = {figures['words_per_s']:,} words/s "
                  f"({figures['words_per_s_after_start']:,} after start-up), peak {figures['peak_rss_mb']:,} MB; "
                  f"targets: {verdict(figures)}")
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=2) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
