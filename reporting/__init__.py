"""Reports: every experiment beside the published figures (:mod:`reporting.results`, the README's generated
table), the stage times (:mod:`reporting.stage_times`) and the published figures themselves
(``reporting/published.yaml``). The papers' GPU records are the GPU wing's (:mod:`paper_runs.records`)."""
