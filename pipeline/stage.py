"""What every DVC stage wrapper in ``pipeline/`` shares: its command line, logging, params and JSON files.

A stage module says only what is particular to it::

    parser = stage_parser("pipeline.align", __doc__, out="data/alignments", metrics="metrics/alignment.json",
                          prepared=True, quiet=True)
    option(parser, "--audio", "data/audio", "output of the synthesize stage")
    args, params = start(parser, argv)
    report = align_talks(...)
    write_json(args.metrics, report, ensure_ascii=False)

JSON files are written atomically (:func:`corpus.io.atomic_write_text`), two-space indented with a final
newline, so a killed stage never leaves half a metrics file for DVC to record.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
from pathlib import Path
from typing import Any, Sequence

from corpus.io import atomic_write_text
from punctuation.params import load_params

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
