"""What every DVC stage wrapper in ``pipeline/`` shares: its command line, logging, params and JSON files.

A stage module says only what is particular to it::

    parser = stage_parser("pipeline.align", __doc__, out="data/alignments", metrics="metrics/alignment.json",
                          prepared=True, quiet=True)
    option(parser, "--audio", "data/audio", "output of the synthesize stage")
    args, params = start(parser, argv)
    report = align_talks(...)
    write_metrics(args.metrics, report, ensure_ascii=False)

JSON files are written atomically (:func:`corpus.io.atomic_write_text`), two-space indented with a final
newline, so a killed stage never leaves half a metrics file for DVC to record.

**Run facts stay out of what DVC hashes.** A metrics file holds what the stage computed, which is the same
bytes whenever the same stage runs on the same inputs; how long it took, how fast it went, how much memory it
used and what *this* run made (as against what a previous, interrupted run left) differ at every run, and
would make a rerun look changed to DVC. :func:`write_metrics` moves every entry whose key names such a fact
(:data:`corpus.io.RUN_FACT`: ``*seconds*``, ``*per_second*``, ``peak_memory*``, ``*_this_run``) out of the metrics
into the stage's record in ``logs/timings/STAGE.json`` (:data:`TIMINGS_DIR`), which neither DVC nor git tracks; the
record also holds the stage's wall time. Under ``dvc repro`` (``DVC_STAGE`` set) each stage writes its record
when it exits; ``python -m pipeline.stage_times`` tabulates them (the README's stage-time table).
"""

from __future__ import annotations

import argparse
import atexit
import json
import logging
import os
import re
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Sequence

from corpus.io import atomic_write_text, split_run_facts
from experiments.numerics import numeric_facts
from experiments.params import load_params

LOG_FORMAT = "%(levelname)s %(name)s: %(message)s"


def stage_parser(module: str, doc: str, *, out: str | None = None, metrics: str | os.PathLike | None = None,
                 prepared: bool = False, quiet: bool = False) -> argparse.ArgumentParser:
    """The parser of ``python -m MODULE``, described by the module's docstring, with ``--params``.

    The options most stages have come on request: ``--out`` and ``--metrics`` (with these defaults),
    ``--prepared`` (the prepare stage's output) and ``--quiet`` (no progress bars).
    """
    parser = argparse.ArgumentParser(prog=f"python -m {module}", description=doc,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    option(parser, "--params", "params.yaml", "params file")
    if prepared:
        option(parser, "--prepared", "data/prepared", "prepared splits")
    if out is not None:
        option(parser, "--out", out, "output")
    if metrics is not None:
        option(parser, "--metrics", metrics, "metrics")
    if quiet:
        parser.add_argument("--quiet", action="store_true", help="no progress bars")
    return parser


def option(parser: argparse.ArgumentParser, flag: str, default: str | os.PathLike, what: str) -> None:
    """Add ``flag`` (to a parser or an argument group), a path or name defaulting to ``default``; its help
    says ``what`` and the default."""
    parser.add_argument(flag, default=str(default), help=f"{what} (default: {default})")


def start(parser: argparse.ArgumentParser, argv: Sequence[str] | None, *,
          log: bool = False) -> tuple[argparse.Namespace, dict[str, Any]]:
    """Parse ``argv``, set up logging when ``log`` (INFO to stderr), and load the params file."""
    args = parser.parse_args(argv)
    if log:
        setup_logging()
    StageRecord.begin(parser.prog.removeprefix("python -m "))
    return args, load_params(args.params)


def setup_logging() -> None:
    """INFO messages of the library on stderr, as ``LEVEL logger: message``."""
    logging.basicConfig(level=logging.INFO, format=LOG_FORMAT)


def write_json(path: str | os.PathLike, data: Any, *, ensure_ascii: bool = True, echo: bool = False) -> Path:
    """Write ``data`` as indented JSON to ``path`` atomically (the folder is made); print it too when ``echo``."""
    text = json.dumps(data, indent=2, ensure_ascii=ensure_ascii)
    atomic_write_text(path, text + "\n")
    if echo:
        print(text)
    return Path(path)


def read_json(path: str | os.PathLike, *, missing_ok: bool = False) -> Any:
    """The JSON content of ``path``; ``None`` for a missing file when ``missing_ok``."""
    path = Path(path)
    if missing_ok and not path.is_file():
        return None
    return json.loads(path.read_text(encoding="utf-8"))


# --------------------------------------------------------------------------------------------- run facts

#: Where each stage's record goes, under the repository (DVC_ROOT) when DVC runs the stage.
TIMINGS_DIR = Path("logs") / "timings"


def write_metrics(path: str | os.PathLike, data: dict[str, Any], *, ensure_ascii: bool = True,
                  echo: bool = False) -> Path:
    """Write a stage's metrics (:func:`write_json`) without its run facts, which go to the stage's record."""
    result, facts = split_run_facts(data)
    if facts:
        StageRecord.add({Path(path).as_posix(): facts})
    return write_json(path, result, ensure_ascii=ensure_ascii, echo=echo)


class StageRecord:
    """The current stage's record of how it ran: its name, wall time, when it finished and the run facts of its
    metrics. One per process; written at exit under DVC (``DVC_STAGE`` names the stage), else not at all."""

    name: str | None = None
    started: float | None = None
    facts: dict[str, Any] = {}

    @classmethod
    def begin(cls, module: str) -> None:
        first = cls.started is None
        cls.name, cls.started, cls.facts = os.environ.get("DVC_STAGE") or module, time.perf_counter(), {}
        if first and os.environ.get("DVC_STAGE"):
            atexit.register(cls.write)

    @classmethod
    def add(cls, facts: dict[str, Any]) -> None:
        cls.facts.update(facts)

    @classmethod
    def facts_of(cls, metrics_path: str | os.PathLike) -> dict[str, Any]:
        """The run facts :func:`write_metrics` took out of ``metrics_path`` in this process (``{}``: none)."""
        return cls.facts.get(Path(metrics_path).as_posix(), {})

    @classmethod
    def content(cls) -> dict[str, Any]:
        seconds = None if cls.started is None else round(time.perf_counter() - cls.started, 1)
        return {"stage": cls.name, "seconds": seconds,
                "finished": datetime.now(timezone.utc).isoformat(timespec="seconds"), **cls.facts,
                "numerics": numeric_facts()}

    @classmethod
    def write(cls, directory: str | os.PathLike | None = None) -> Path:
        """Write the record to ``directory`` (default: :data:`TIMINGS_DIR` under ``DVC_ROOT`` or here)."""
        if directory is None:
            directory = Path(os.environ.get("DVC_ROOT", ".")) / TIMINGS_DIR
        # "train@blstm" is a fine file name; a stage in a sub-directory's dvc.yaml ("sub/dvc.yaml:name") is not
        name = re.sub(r"[^\w@.-]+", "_", cls.name or "stage")
        return write_json(Path(directory) / f"{name}.json", cls.content())
