"""Every figure the project draws (matplotlib, Agg backend): confusion matrices and learning curves
(:mod:`figures.plots`), the papers' model-analysis figures (:mod:`figures.analysis`). Nothing on the way of
``punctuate`` or of ``import models`` imports this package."""
