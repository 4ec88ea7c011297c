"""A/B comparisons that hold: two param sets trained back to back on one machine over several seeds, scored on
dev splits through ``punctuate``'s decoding path, a paired bootstrap over talks, and a keep rule fixed in a spec
before the run.

* :mod:`comparisons.spec` -- the spec (question, arms, seeds, decision splits, keep rule), DVC-style overrides,
  each arm's params and chain;
* :mod:`comparisons.ab` -- the runs: each step a ``python -m pipeline.train`` process, minutes, machine, scores,
  resumable results;
* :mod:`comparisons.bootstrap` -- talk blocks, per-talk confusion matrices, the paired bootstrap;
* :mod:`comparisons.report` -- the keep rule applied, the JSON and Markdown report, test splits after the verdict.

``python -m comparisons run SPEC`` and ``python -m comparisons report SPEC`` (:mod:`comparisons.__main__`).
"""
