#!/usr/bin/env bash
# Every paper-profile experiment to its full schedule on a GPU, one record each in metrics/paper/NAME.json
# (transformer_learned transformer_word transformer_speech transformer_word_speech drnn_lwma wrn wrn_blstm
# conv blstm lstm ff2 ffa). One call works on one experiment and stays within one time-limited GPU command:
#
#   scripts/run_paper.sh            # the next experiment without a record: trains for at most $SLOT_S s
#                                   # (exit 3: paused, run it again), then scores Ref/ASR and writes the record
#   scripts/run_paper.sh NAME       # that experiment
#   scripts/run_paper.sh status     # which records exist
#   scripts/run_paper.sh report     # reports/paper_results.md, beside the published and small-profile figures
#
# Repeat the first form until it prints "all 12 records present". It needs the pipeline's caches: data/features,
# data/feature_sets/{learned,speech,word_speech} (the transformer_* inputs) and data/prepared; feature caches
# travel with `python -m embeddings.pack`. Checkpoints and models live under gpu_runs/paper/NAME (git-ignored).
# Set PAPER_GIT_COMMIT to the commit being run where the tree has no .git.
set -u
PYTHON=${PYTHON:-python3}
SLOT_S=${SLOT_S:-480}
case ${1:-next} in
  status|report) exec $PYTHON -m pipeline.paper "$1" ;;
  *) exec $PYTHON -m pipeline.paper run "${1:-next}" --slot-s "$SLOT_S" ;;
esac
