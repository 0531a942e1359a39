#!/bin/bash
# A/B: nmt translate as a process, HEAD (worktree) vs working tree, alternating
RUN=/work/exp/runs/ende-recipe
for beam in 1 5; do for rep in 1 2; do
  for side in before after; do
    if [ $side = before ]; then dir=/tmp/wt-head; else dir=/work/main; fi
    s=$(date +%s.%N)
    (cd $dir && PYTHONPATH=$dir python -m nmt translate $RUN -i /tmp/src5k.en -o /tmp/tk/out-$side-b$beam.txt --beam $beam)
    e=$(date +%s.%N)
    echo "beam $beam rep $rep $side $(echo "$e - $s" | bc) s"
  done
done; cmp /tmp/tk/out-before-b$beam.txt /tmp/tk/out-after-b$beam.txt && echo "beam $beam outputs identical"; done
