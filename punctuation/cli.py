"""``punctuate``: restore punctuation in a transcript with a trained model directory.

    punctuate --model artifacts/model transcript.txt -o transcript.punct.txt
    cat transcript.txt | punctuate --model artifacts/model --format iwslt
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from punctuation.iwslt import write_iwslt


class InputError(Exception):
    """Input that cannot be read as text; the message names the input."""


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
        name, data = str(path), path.read_bytes()
    try:
        return name, data.decode("utf-8-sig")
    except UnicodeDecodeError as error:
        line = data[: error.start].count(b"\n") + 1
        raise InputError(f"{name}:{line}: not UTF-8 text (byte offset {error.start})") from error


def write_output(destination: str | None, content: str) -> None:
    if destination in (None, "-"):
        sys.stdout.write(content)
        return
    path = Path(destination)
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_name(path.name + ".tmp")
    temporary.write_text(content, encoding="utf-8")
    temporary.replace(path)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="punctuate", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("input", nargs="?", help="text file to punctuate (default: standard input)")
    parser.add_argument("--model", required=True, help="trained model directory (e.g. artifacts/model)")
    parser.add_argument("-o", "--output", help="where to write the result (default: standard output)")
    parser.add_argument("--format", choices=("text", "iwslt"), default="text",
                        help="text: readable punctuated text; iwslt: one 'word<TAB>LABEL' line per token")
    parser.add_argument("--device", default="cpu", help="torch device (default: cpu)")
    args = parser.parse_args(argv)

    from punctuation.inference import Punctuator, render_text  # heavy imports after argument parsing

    try:
        _, text = read_text(args.input)
        punctuator = Punctuator(args.model, device=args.device)
    except (InputError, FileNotFoundError, ValueError) as error:
        print(f"punctuate: error: {error}", file=sys.stderr)
        return 2
    words, labels = punctuator.punctuate(text)
    if args.format == "iwslt":
        if args.output in (None, "-"):
            write_output(None, "".join(f"{w}\t{l}\n" for w, l in zip(words, labels)))
        else:
            write_iwslt(args.output, words, labels)
    else:
        write_output(args.output, render_text(words, labels) + ("\n" if words else ""))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
