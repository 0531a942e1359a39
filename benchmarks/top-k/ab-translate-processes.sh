#!/bin/bash
# A/B of `nmt translate` as whole processes: the code in BEFORE (a git worktree of the earlier
# commit) against this checkout, alternating, greedy and beam 5, and whether the outputs match.
#   bash benchmarks/top-k/ab-translate-processes.sh RUN SRC BEFORE [REPS]
# ab-translate-processes.txt: RUN = the en->de Transformer-tiny run, SRC = the first 5,000 lines
# of ../shared/data/multi30k/train.en, BEFORE = `git worktree add /tmp/wt-head b6b166f`.
set -euo pipefail
RUN=$1; SRC=$2; BEFORE=$3; REPS=${4:-2}
AFTER=$(cd "$(dirname "$0")/../.." && pwd)
OUT=$(mktemp -d)
for beam in 1 5; do
  for rep in $(seq "$REPS"); do
    for side in before after; do
      dir=$BEFORE; [ "$side" = after ] && dir=$AFTER
      s=$(date +%s.%N)
      (cd "$dir" && PYTHONPATH="$dir" python -m nmt translate "$RUN" -i "$SRC" -o "$OUT/$side-b$beam.txt" --beam "$beam")
      e=$(date +%s.%N)
      echo "beam $beam rep $rep $side $(echo "$e - $s" | bc) s"
    done
  done
  cmp "$OUT/before-b$beam.txt" "$OUT/after-b$beam.txt" && echo "beam $beam outputs identical"
done
