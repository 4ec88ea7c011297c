"""Reports: every experiment beside the published figures (:mod:`reporting.results`, the README's generated
table), the paper-profile GPU records (:mod:`reporting.paper`) and the published figures themselves
(``reporting/published.yaml``)."""
