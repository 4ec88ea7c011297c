"""What ``params.yaml`` defines, resolved: the active profile, each experiment's model and training settings,
the variants (an experiment on another feature set). :mod:`experiments.params` is the one reader of the file
for the library and the stages; it imports nothing else of the project."""
