"""``python -m aligner AUDIO TRANSCRIPT -o WORDS.tsv`` (see :mod:`aligner.cli`)."""

import sys

from aligner.cli import main

sys.exit(main())
