"""The DVC stage wrappers. Every stage runs under the project's one numeric environment (the same bytes on every
x86-64 CPU generation: :mod:`experiments.numerics`), set here, before any stage module loads numpy or torch."""

from experiments.numerics import pin_numerics

pin_numerics()
