"""``punctuate``: restore punctuation in a transcript with a trained model directory.

    punctuate --model artifacts/model transcript.txt -o transcript.punct.txt
    cat transcript.txt | punctuate --model artifacts/model --format iwslt

Your words are never changed: the text is split at whitespace and every word is written back byte for byte,
with its case and the whitespace (line breaks included) around it. The tool only

* inserts a predicted mark (, . ?) after a word, in place of the mark that stood there (, ; : . ! ? ... --
  at a word's end, or standing alone between words, are replaced; marks inside a word -- 6.8, it'll, e-mail
  addresses, URLs -- are part of it; U.S., Mr., e.g. keep their period; a closing quote or bracket stays
  where it was), and
* capitalises sentence starts and the pronoun "i" (only words written all in lower case; --keep-case turns
  this off).

The model reads each word in the benchmark's tokenisation (won't -> "wo n't", lower-cased) and the label of
a word's last token is the mark after the word. Words the model has no tokens for (emoji, symbols,
(stage notes)) are written back unchanged and get no mark. --format iwslt writes one 'word<TAB>LABEL' line
per word, the word as you gave it (won't stays one word). Details: corpus/user_text.py.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from pathlib import Path

# Only light modules at import time: `punctuate --help` must not load torch; the model code is imported
# once the arguments, the input and the output folder have been checked.
from corpus.io import atomic_write_text


class InputError(Exception):
    """Input that cannot be read as text; the message names the input."""


class OutputError(Exception):
    """An output path that cannot be written; the message names the path."""


def read_text(source: str | None) -> tuple[str, str]:
    """Return ``(name, text)`` of a file path, or of standard input when ``source`` is None or '-'."""
    if source in (None, "-"):
        name, data = "<stdin>", sys.stdin.buffer.read()
    else:
        path = Path(source)
        if not path.exists():
            raise InputError(f"{path}: no such file")
        if not path.is_file():
            raise InputError(f"{path}: not a regular file")
        try:
            data = path.read_bytes()
        except OSError as error:
            raise InputError(f"{path}: cannot read ({error.strerror or error})") from error
        name = str(path)
    try:
        return name, data.decode("utf-8-sig")
    except UnicodeDecodeError as error:
        line = data[: error.start].count(b"\n") + 1
        raise InputError(f"{name}:{line}: not UTF-8 text (byte offset {error.start})") from error


def check_output(destination: str | None) -> None:
    """Make sure ``destination`` can be written *before* any work is done; OutputError names the path.

    The nearest existing folder on the way to the file is probed by creating (and removing) a uniquely named
    file in it, which is what the final atomic write will do.
    """
    if destination in (None, "-"):
        return
    path = Path(destination)
    if path.is_dir():
        raise OutputError(f"{path}: is a directory, not a file")
    folder = path.parent
    while not folder.exists() and folder != folder.parent:
        folder = folder.parent
    if not folder.is_dir():
        raise OutputError(f"cannot write {path}: {folder} is not a directory")
    try:
        descriptor, probe = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".probe", dir=folder)
    except OSError as error:
        raise OutputError(f"cannot write {path}: folder {folder} is not writable ({error.strerror or error})") \
            from error
    os.close(descriptor)
    os.unlink(probe)


def write_output(destination: str | None, content: str) -> None:
    """Write to standard output (UTF-8 bytes, line ends as given) or atomically to a file.

    A file is written to a unique temporary file beside it and renamed over it when complete
    (:func:`corpus.io.atomic_path`), so two runs writing the same file never mix their output.
    """
    if destination in (None, "-"):
        sys.stdout.flush()
        buffer = getattr(sys.stdout, "buffer", None)
        if buffer is None:
            sys.stdout.write(content)
        else:
            buffer.write(content.encode("utf-8"))
            buffer.flush()
        return
    try:
        atomic_write_text(destination, content)
    except OSError as error:
        raise OutputError(f"cannot write {destination}: {error.strerror or error}") from error


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="punctuate", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("input", nargs="?", help="text file to punctuate (default: standard input)")
    parser.add_argument("--model", required=True, help="trained model directory (e.g. artifacts/model)")
    parser.add_argument("-o", "--output", help="where to write the result (default: standard output); written "
                                               "atomically, its folder is checked before the model is loaded")
    parser.add_argument("--format", choices=("text", "iwslt"), default="text",
                        help="text: your text with marks inserted; iwslt: one 'word<TAB>LABEL' line per word "
                             "as you wrote it")
    parser.add_argument("--keep-case", "--no-capitalise", "--no-capitalize", dest="capitalise",
                        action="store_false",
                        help="do not capitalise sentence starts and 'i' (text format); every word keeps its case")
    parser.add_argument("--device", default="cpu", help="torch device (default: cpu)")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)

    def fail(error: Exception) -> int:
        print(f"punctuate: error: {error}", file=sys.stderr)
        return 2

    try:
        _, text = read_text(args.input)
        check_output(args.output)
    except (InputError, OutputError) as error:
        return fail(error)

    from punctuation.inference import Punctuator  # torch and the model code: only now

    try:
        punctuator = Punctuator(args.model, device=args.device)
    except (FileNotFoundError, ValueError) as error:
        return fail(error)
    user_text, labels, rendered = punctuator.punctuate_text(text, capitalise=args.capitalise)
    if args.format == "iwslt":
        content = "".join(f"{word.text}\t{label}\n" for word, label in zip(user_text.words, labels))
    else:
        content = rendered
    try:
        write_output(args.output, content)
    except OutputError as error:
        return fail(error)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
