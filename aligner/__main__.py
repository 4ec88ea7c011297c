"""``python -m aligner AUDIO TRANSCRIPT -o WORDS.tsv`` and ``python -m aligner batch ...`` (see :mod:`aligner.cli`)."""

import sys

from aligner.cli import main

if __name__ == "__main__":  # guarded: worker processes started with "spawn" import this module again
    sys.exit(main())
