"""``punctuate`` over a corpus as a user runs it: words/s and peak memory, one process against ``--workers``,
beside separate calls, one per transcript, and beside one call on a single large file.

    taskset -c 0,1 python -m benchmarks.punctuate_batch [--model DIR] [--transcripts 1000] [--words 500]
                                                        [--workers 2] [--single-calls 30] [--large-words 200000]
                                                        [--text data/prepared/dev.tsv] [--json OUT]

Every figure comes from fresh ``python -m inference.cli`` processes on a corpus made here (``--transcripts``
files of ``--words`` words: consecutive stretches of ``--text``'s words, an IWSLT file, 20 words a line; see
:func:`benchmarks.punctuate_speed.benchmark_text`), wall time and memory included from interpreter start to exit:

* ``batch``: ``punctuate CORPUS -o OUT`` (one process), and with ``--workers N`` (the driver and N worker
  processes), each into a fresh output folder; ``words_per_s`` over the whole run;
* ``single calls``: ``punctuate FILE -o OUT`` for ``--single-calls`` transcripts spread over the corpus, their
  wall time extrapolated to all of them (``extrapolated_s``; the sample and the extrapolation are printed);
* ``large file``: one call on a single file of ``--large-words`` words, the words/s the batch is held to.

Peak memory of a run is sampled every 0.1 s over its whole process tree: ``peak_rss_mb`` (the sum of resident
sets: shared library pages count once per process, an upper bound) and ``peak_pss_mb`` (proportional set size:
shared pages split between the processes that map them; what the machine needs). The outputs of the one-process
and the ``--workers`` run are compared byte for byte (``same_outputs``).

The targets (:data:`TARGETS`, on 2 CPU cores with the default model) are printed beside each figure:
the batch at least 80 % of the large file's words/s and at least 10 times faster than the separate calls, and at
most 1.5 GB at its peak. Run it on 2 otherwise idle cores (``taskset -c 0,1``); nothing is asserted.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from experiments.numerics import pin_numerics  # noqa: E402

pin_numerics()  # the pipeline's numerics, before numpy or torch loads (experiments/numerics.py)

from benchmarks.punctuate_speed import WORDS_PER_LINE, benchmark_text

REPO = Path(__file__).resolve().parents[1]
#: figure -> (comparison, bound)
TARGETS = {"vs_large_file": (">=", 0.8), "vs_single_calls": (">=", 10.0), "peak_pss_mb": ("<=", 1536)}


def _tree_memory(pid: int) -> tuple[int, int]:
    """``(RSS, PSS)`` in bytes summed over a process and its descendants (0 for one gone meanwhile)."""
    import psutil

    try:
        root = psutil.Process(pid)
        processes = [root, *root.children(recursive=True)]
    except psutil.Error:
        return 0, 0
    rss = pss = 0
    for process in processes:
        try:
            info = process.memory_full_info()
        except psutil.Error:
            continue
        rss += info.rss
        pss += getattr(info, "pss", info.rss)
    return rss, pss


def run_measured(command: list[str]) -> dict[str, Any]:
    """Run ``command`` (from the repository); its wall seconds and the peak memory of its process tree."""
    peak = {"rss": 0, "pss": 0}
    with tempfile.TemporaryFile() as err:
        started = time.perf_counter()
        process = subprocess.Popen(command, cwd=REPO, stdout=subprocess.DEVNULL, stderr=err)
        stop = threading.Event()

        def sample() -> None:
            while not stop.is_set():
                rss, pss = _tree_memory(process.pid)
                peak["rss"], peak["pss"] = max(peak["rss"], rss), max(peak["pss"], pss)
                stop.wait(0.1)

        sampler = threading.Thread(target=sample, daemon=True)
        sampler.start()
        returncode = process.wait()
        wall = time.perf_counter() - started
        stop.set()
        sampler.join()
        err.seek(0)
        stderr = err.read().decode(errors="replace")
    if returncode != 0:
        raise RuntimeError(f"{' '.join(command)} exited {returncode}: {stderr[-2000:]}")
    return {"wall_s": round(wall, 2), "peak_rss_mb": round(peak["rss"] / 2**20), "peak_pss_mb": round(peak["pss"] / 2**20)}


def write_corpus(folder: Path, transcripts: int, words: int, source: Path | None) -> int:
    """``transcripts`` files of ``words`` words each (consecutive stretches of the source's words); the words."""
    stream = benchmark_text(transcripts * words, source).split()
    folder.mkdir(parents=True, exist_ok=True)
    for index in range(transcripts):
        piece = stream[index * words:(index + 1) * words]
        lines = (" ".join(piece[i:i + WORDS_PER_LINE]) for i in range(0, len(piece), WORDS_PER_LINE))
        (folder / f"transcript{index:05d}.txt").write_text("\n".join(lines) + "\n", encoding="utf-8")
    return transcripts * words


def outputs(folder: Path) -> dict[str, bytes]:
    return {path.relative_to(folder).as_posix(): path.read_bytes() for path in sorted(folder.rglob("*.txt"))}


def verdict(figures: dict[str, Any]) -> str:
    out = []
    for key, (comparison, bound) in TARGETS.items():
        value = figures.get(key)
        if value is None:
            continue
        met = value >= bound if comparison == ">=" else value <= bound
        out.append(f"{key} {comparison} {bound:,} {'met' if met else 'MISSED'}")
    return "; ".join(out)


def default_model(params: Path) -> Path:
    """``punctuate.text_model`` of the params (the model ``punctuate`` uses on text)."""
    import yaml

    section = (yaml.safe_load(params.read_text(encoding="utf-8")) or {}).get("punctuate") or {}
    return params.parent / section["text_model"]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.punctuate_batch", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--params", default="params.yaml")
    parser.add_argument("--model", help="model directory (default: punctuate.text_model of the params)")
    parser.add_argument("--transcripts", type=int, default=1000)
    parser.add_argument("--words", type=int, default=500, help="words per transcript")
    parser.add_argument("--workers", type=int, default=2, help="worker processes of the parallel run")
    parser.add_argument("--single-calls", type=int, default=30, help="separate calls timed, then extrapolated")
    parser.add_argument("--large-words", type=int, default=200_000, help="words of the single large file")
    parser.add_argument("--text", default="data/prepared/dev.tsv", help="IWSLT file whose words make the corpus")
    parser.add_argument("--json", help="also write the figures here")
    args = parser.parse_args(argv)

    model = Path(args.model) if args.model else default_model(REPO / args.params)
    model = model if model.is_absolute() else REPO / model
    if not (model / "config.json").is_file():
        print(f"{model}: no trained model (run `dvc repro` first, or give --model)")
        return 2
    cli = [sys.executable, "-m", "inference.cli", "--model", str(model)]
    figures: dict[str, Any] = {"model": str(model), "transcripts": args.transcripts, "words_per_transcript": args.words,
                               "cores": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None}
    with tempfile.TemporaryDirectory() as scratch:
        scratch = Path(scratch)
        total = write_corpus(scratch / "corpus", args.transcripts, args.words, REPO / args.text)
        figures["words"] = total
        runs = {}
        for name, extra in (("one_process", []), (f"workers_{args.workers}", ["--workers", str(args.workers)])):
            measured = run_measured([*cli, str(scratch / "corpus"), "-o", str(scratch / name), "--quiet"] + extra)
            runs[name] = {**measured, "words_per_s": round(total / measured["wall_s"])}
            print(f"batch, {name.replace('_', ' ')}: {total:,} words in {measured['wall_s']:.1f} s = "
                  f"{runs[name]['words_per_s']:,} words/s; peak {measured['peak_pss_mb']:,} MB PSS "
                  f"({measured['peak_rss_mb']:,} MB RSS summed over its processes)")
        figures["runs"] = runs
        figures["same_outputs"] = outputs(scratch / "one_process") == outputs(scratch / f"workers_{args.workers}")
        print(f"outputs of the two runs the same bytes: {figures['same_outputs']}")

        sample = sorted({round(i * (args.transcripts - 1) / max(1, args.single_calls - 1))
                         for i in range(min(args.single_calls, args.transcripts))})
        began = time.perf_counter()
        for index in sample:
            name = f"transcript{index:05d}.txt"
            run_measured([*cli, str(scratch / "corpus" / name), "-o", str(scratch / "single" / name)])
        sampled = time.perf_counter() - began
        extrapolated = sampled * args.transcripts / len(sample)
        figures["single_calls"] = {"sampled": len(sample), "sampled_s": round(sampled, 2),
                                   "extrapolated_s": round(extrapolated, 1),
                                   "words_per_s": round(total / extrapolated)}
        print(f"separate calls: {len(sample)} of the {args.transcripts:,} transcripts took {sampled:.1f} s, "
              f"{sampled / len(sample):.2f} s each: all of them would take about {extrapolated:,.0f} s "
              f"({figures['single_calls']['words_per_s']:,} words/s; extrapolated from the sample)")

        large = scratch / "large.txt"
        large.write_text(benchmark_text(args.large_words, REPO / args.text), encoding="utf-8")
        measured = run_measured([*cli, str(large), "-o", str(scratch / "large.out.txt")])
        figures["large_file"] = {**measured, "words": args.large_words,
                                 "words_per_s": round(args.large_words / measured["wall_s"])}
        print(f"one large file: {args.large_words:,} words in {measured['wall_s']:.1f} s = "
              f"{figures['large_file']['words_per_s']:,} words/s; peak {measured['peak_pss_mb']:,} MB PSS")

    for name, run in runs.items():
        run.update(vs_large_file=round(run["words_per_s"] / figures["large_file"]["words_per_s"], 2),
                   vs_single_calls=round(figures["single_calls"]["extrapolated_s"] / run["wall_s"], 1))
        print(f"batch, {name.replace('_', ' ')}: {run['vs_large_file']:.0%} of the large file's words/s, "
              f"{run['vs_single_calls']:.1f}x faster than separate calls, peak {run['peak_pss_mb']:,} MB; "
              f"targets: {verdict(run)}")
    one, many = runs["one_process"], runs[f"workers_{args.workers}"]
    print("\nFor the README:\n"
          f"{args.transcripts:,} transcripts of {args.words} words ({total:,} words, {figures['cores']} cores): one "
          f"process {one['words_per_s']:,} words/s (peak {one['peak_pss_mb']:,} MB), `--workers {args.workers}` "
          f"{many['words_per_s']:,} words/s (peak {many['peak_pss_mb']:,} MB); one call per transcript about "
          f"{figures['single_calls']['words_per_s']:,} words/s ({len(sample)} calls timed and extrapolated); one "
          f"file of {args.large_words:,} words {figures['large_file']['words_per_s']:,} words/s.")
    if args.json:
        Path(args.json).write_text(json.dumps(figures, indent=2) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
