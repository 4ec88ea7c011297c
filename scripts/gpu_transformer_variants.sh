#!/usr/bin/env bash
# Yi & Tao's input variants of the self-attention model (word / learned / speech / word+speech, optionally the
# per-occurrence and acoustic ones) on one borrowed GPU, in the `paper` and the `small` profile at once.
#
# A GPU slot is a series of time-limited commands, and the paper schedule (20 epochs, 13,140 steps) is longer
# than one, so every run is a fixed-steps run of scripts/time_boxed_run.py that checkpoints when the slot ends
# and resumes in the next command. Feature caches travel packed (python -m embeddings.pack) and are unpacked
# once; everything lives under gpu_runs/ (git-ignored, so it stays on the machine between commands).
#
#   scripts/gpu_transformer_variants.sh unpack PACK.npz...     # features.npz -> data/features, X.npz -> data/feature_sets/X
#   scripts/gpu_transformer_variants.sh train SECONDS pause|stop VARIANT...
#       VARIANT = word | learned | speech | word_speech | word_occurrence | word_acoustic
#       pause: checkpoint after SECONDS (run the same command again to go on); stop: the last slot, training
#       ends for good after SECONDS and whatever it reached is scored (run.json says how far it got).
# Finished runs are copied to $OUT/<profile>_<variant>.tgz (run.json, history, learning curves, predictions, log).
# (The paper profile's full-schedule records, metrics/paper/NAME.json, are made by scripts/run_paper.sh;
# this script keeps the time-boxed runs of both profiles side by side.)
set -u
export PYTHONUNBUFFERED=1
PYTHON=${PYTHON:-python3}
mode=${1:?unpack or train}
shift

if [ "$mode" = unpack ]; then
  for pack in "$@"; do
    name=$(basename "$pack" .npz)
    target=data/feature_sets/$name
    [ "$name" = features ] && target=data/features
    $PYTHON -m embeddings.pack unpack "$pack" "$target" > /dev/null || { echo "unpack failed: $pack"; exit 1; }
    echo "unpacked $pack -> $target"
  done
  exit 0
fi

seconds=${1:?seconds}; how=${2:?pause or stop}; shift 2
case $how in pause) slot=(--pause-after-s "$seconds") ;; stop) slot=(--stop-after-s "$seconds") ;;
  *) echo "pause or stop, not $how"; exit 2 ;; esac
mkdir -p gpu_runs
for variant in "$@"; do
  features=data/feature_sets/$variant
  [ "$variant" = word ] && features=data/features
  published=yi_tao_2019/$variant
  case $variant in word_occurrence|word_acoustic) published=none ;; esac
  for profile in paper small; do
    run=gpu_runs/${profile}_transformer_$variant
    [ -f "$run/run.json" ] && continue   # finished in an earlier slot
    extra=()
    # paper: 16 threads per process (train.threads) is meant for a machine of its own; here 8 processes share it
    [ "$profile" = paper ] && extra=(--set threads=2)
    (
      $PYTHON scripts/time_boxed_run.py --experiment transformer --profile "$profile" --features "$features" \
        --prepared data/prepared --out "$run" --steps schedule "${slot[@]}" --published "$published" "${extra[@]}" \
        >> "$run.log" 2>&1
      status=$?
      echo "$profile $variant: exit $status; $(grep -o '{"experiment.*' "$run.log" | tail -1)"
      if [ $status -eq 0 ]; then
        tar czf "$OUT/${profile}_$variant.tgz" "$run/run.json" "$run/model/history.csv" \
          "$run/model/learning_curves.png" "$run/predictions" "$run.log"
      fi
    ) &
  done
done
wait
nvidia-smi --query-gpu=name,memory.used --format=csv,noheader 2>/dev/null
