"""``python -m aligner AUDIO TRANSCRIPT -o WORDS.tsv`` and ``python -m aligner batch ...`` (see :mod:`aligner.cli`).

The command runs under the pipeline's numeric environment (experiments/numerics.py). ``aligner/__init__.py`` has
loaded numpy before this module runs, so the pin is :func:`experiments.numerics.pin_or_restart`: from an unpinned
shell the command starts again, pinned, before it does anything."""

import sys

from experiments.numerics import pin_or_restart

if __name__ == "__main__":  # guarded: worker processes started with "spawn" import this module again
    pin_or_restart()
    from aligner.cli import main

    sys.exit(main())
