#!/bin/bash
# Every table, text file and page under results/ (and the front page's table) written again from
# the committed runs, in place: no training, about 10 minutes on 2 cores. Run it from the repo root
# of a clean checkout, then `git diff --stat` lists what the code of this checkout changes (with
# matplotlib installed, folders committed without a plot gain one, as untracked files).
# Left out: results/limit/table.md (`python -m studies.sweep limit`, 2.4 min, no runs behind it) and
# results/protocols/mingpt-summed-batch.md (the old minGPT table, kept as it was);
# results/mechanism-interventions/full/RUN.md (how issue 38's full cells were run: not a table).
set -euo pipefail
cd "$(dirname "$0")/.."
PY="python"
par() { xargs -P 2 -I{} sh -c '{}'; }     # at most 2 commands at a time (2 cores)

# 1. each folder's table.md (and critical.json, and mstar.png where matplotlib is installed)
{ for j in $(find results -name sweep.json | sort); do
      echo "$PY -m studies.sweep --out $(dirname "$j") --report > /dev/null"; done
  for d in s-2 s-3; do echo "$PY -m studies.steps --out results/parity/$d --report > /dev/null"; done
  for d in s-2 s-3; do echo "$PY -m studies.steps --out results/parity/$d-m-4000 --report --against \
results/parity/$d > /dev/null"; done; } | par

# 2. the tables over several folders (each page names the one it quotes); the protocol study's
# compare.md is written from inside results/protocols, as it was made, with the repo root on
# PYTHONPATH so that `-m studies.sweep` finds the package
S=results/protocols; W=results/width; F=results/families
par > /dev/null <<EOF
$PY -m studies.sweep families $F/and-s1 $F/and-s2 $W/d-128 $F/and-s4 $F/and-s5 $F/or-s3 $F/majority-s3 $F/junta-s1 $F/junta-s2 $F/junta-s3 $F/junta-s4 $F/junta-s5 $F/parity-s2 --seeds 20 --out $F/families.md
$PY -m studies.sweep families $F/and-s1 $F/and-s2 $W/d-128 $F/and-s4 $F/and-s5 $F/junta-s1 $F/junta-s2 $F/junta-s3 $F/junta-s4 $F/junta-s5 --Ts 100 --seeds 20 --out $F/across-s.md
cd $S && PYTHONPATH=../.. $PY -m studies.sweep compare ../paper-range-ours steps-250 steps-500 steps-2000 early-stop adamw mingpt lr-3e-4 lr-3e-3 heads-1 heads-4 ../width/d-32 ../width/d-128 float64 paper-data-d-128 --seeds 20 --Ts 100,300,1100 --out ../../$S/compare.md
$PY -m studies.sweep compare $W/d-128 $S/paper-data-d-128 --seeds 20 --Ts 100,300,1100 --out $S/paper-data-d-128-vs-d-128.md
$PY -m studies.sweep compare results/paper-range-ours $S/pos-zero $S/mlp-4d $S/mlp-4d-pos-zero --seeds 10 --Ts 300,1100 --out $S/mingpt-block-screen.md
$PY -m studies.sweep compare results/paper-range-ours $S/pos-zero $S/mlp-4d $S/mlp-4d-pos-zero --seeds 20 --Ts 100,300,500,700,900,1100 --growth-from 100 --out $S/mingpt-block.md
$PY -m studies.sweep compare $W/d-128 $S/d-128-pos-zero --seeds 10 --Ts 300,1100 --out $S/d-128-pos-zero-screen.md
$PY -m studies.sweep compare results/extended $S/mlp-4d --seeds 10 --Ts 100,300,1100,3000 --growth-from 100 --out $S/mlp-4d-T3000.md
$PY -m studies.sweep width $W/d-32 results/extended $W/d-128 $W/d-256 --seeds 20 --Ts 10,30,100,300,1100,3000 --out $W/width.md
$PY -m studies.sweep width results/extended $W/d-128 --seeds 20 --Ts 10,30,100,300,1100,3000,10000 --out $W/three-decades.md
$PY -m studies.sweep width $W/d-128 --seeds 10 --out $W/d-128-seeds-0-9.md
$PY -m studies.sweep width results/extended $W/d-80 $W/d-96 $W/d-112 $W/d-128 --seeds 20 --Ts 10,30,100,300,1100,3000 --out $W/critical.md
$PY -m studies.sweep compare results/extended $W/d-80 $W/d-128 --seeds 20 --Ts 10,30,100,300,1100,3000 --out $W/critical-paired.md
$PY -m studies.sweep compare $W/d-128 $W/d-80 $W/d-96 $W/d-112 --seeds 20 --Ts 10,30,100,300,1100,3000 --growth-from 100 --out $W/edge.md
$PY -m studies.sweep compare results/extended $W/d-80 $W/d-96 $W/d-112 $W/d-128 --seeds 10 --Ts 300,1100 --out $W/critical-screen.md
$PY -m studies.sweep compare results/extended $S/heads-4 $W/d-128-h-32 $W/d-128 --seeds 10 --Ts 300,1100 --out $W/head-width.md
$PY -m studies.sweep compare results/paper-range-ours results/paper-range-paper-data --out results/paper-range-paper-data/compare.md
$PY -m studies.sweep headline --d64 results/extended --d128 $W/d-128 --out results/headline.md --readme README.md
EOF

# 3. the mechanism study's table, then every page's copies of the tables
$PY -m studies.mechanism report results/mechanism > /dev/null
# issue 38: C's factors (from the study's borderline runs trained again with them) and the bound's size
$PY -m studies.mechanism factors results/mechanism --factors results/mechanism-factors \
    --out results/mechanism-factors/factors.md > /dev/null
# issue 38's screen: the arms paired by seed with the study
$PY -m studies.mechanism paired results/mechanism results/mechanism-interventions/screen/{baseline-rerun,freeze-ln1,decay-except-ln,freeze-lnf} \
    --out results/mechanism-interventions/screen/paired.md \
    --pairs results/mechanism-interventions/screen/pairs.csv > /dev/null
# issue 38's full cells: each intervention paired by seed with the study, T = 100..3000
$PY -m studies.mechanism paired results/mechanism results/mechanism-interventions/full/{freeze-ln1,freeze-lnf,decay-except-ln} \
    --out results/mechanism-interventions/full/paired.md \
    --pairs results/mechanism-interventions/full/pairs.csv > /dev/null
# issue 38's arm that lowers the token norm, made on the machine of results/mechanism-factors: paired with that rerun
$PY -m studies.mechanism paired results/mechanism-factors results/mechanism-interventions/full/freeze-ln1-low \
    --out results/mechanism-interventions/full/paired-low.md \
    --pairs results/mechanism-interventions/full/pairs-low.csv > /dev/null
# and its m* at d = 64 (a sweep of protocol freeze-ln1-low, 10 seeds) beside the study's sweep, seed for seed
$PY -m studies.sweep compare results/extended results/protocols/freeze-ln1-low --seeds 10 --Ts 100,300,1100 \
    --out results/mechanism-interventions/full/mstar-low.md > /dev/null
# issue 38's 40 seeds at d = 128, T = 3000: the LN1 arms paired by seed with a baseline trained beside them
$PY -m studies.mechanism paired results/mechanism-interventions/more-seeds/baseline-rerun results/mechanism-interventions/more-seeds/{freeze-ln1,decay-except-ln} \
    --out results/mechanism-interventions/more-seeds/paired.md \
    --pairs results/mechanism-interventions/more-seeds/pairs.csv > /dev/null
# issue 47's low-gain arm with its step restored (W_Q, W_K, W_V initialised and stepped at 2x: the
# freeze-ln1 run bit for bit), and each of the two factors alone, paired with the study's rerun
# made under the same kernel as the low arm and with the low arm itself
RS=results/mechanism-interventions/restored
$PY -m studies.symmetries same results/mechanism-interventions/full/freeze-ln1 \
    $RS/freeze-ln1-low-restored results/mechanism-interventions/restored/same.md > /dev/null
$PY -m studies.mechanism paired results/mechanism $RS/freeze-ln1-low-restored \
    --out results/mechanism-interventions/restored/paired-restored.md \
    --pairs results/mechanism-interventions/restored/pairs-restored.csv > /dev/null
$PY -m studies.mechanism paired results/mechanism-factors $RS/freeze-ln1-low-{init,step} \
    --out results/mechanism-interventions/restored/paired-factors.md \
    --pairs results/mechanism-interventions/restored/pairs-factors.csv > /dev/null
$PY -m studies.mechanism paired results/mechanism-interventions/full/freeze-ln1-low \
    $RS/freeze-ln1-low-{init,step} --out results/mechanism-interventions/restored/against-low.md \
    > /dev/null
# issue 38's trajectories: eventual successes against failures at every logged step
$PY -m studies.mechanism trace-report results/mechanism-trajectories > /dev/null
$PY -m studies.mechanism trace-report results/mechanism-trajectories-T > /dev/null
# issue 47: the arm x T interaction of the arms that hold the token norm high (from pairs.csv), and
# the measures against the model's exact symmetries (trains two study models again: about 25 s)
$PY -m studies.symmetries interaction results/mechanism-interventions/full/pairs.csv \
    results/symmetries/interaction.md > /dev/null
$PY -m studies.symmetries measures results/symmetries/measures.md > /dev/null
# and each small paired cell with the exact sign test beside its bootstrap (the 40-seed cell's new
# seeds 20-39 alone: the cell was chosen by seeds 0-19)
P=results/mechanism-interventions
$PY -m studies.symmetries cells $P/full/pairs.csv results/symmetries/cells-full.md > /dev/null
$PY -m studies.symmetries cells $P/full/pairs-low.csv results/symmetries/cells-low.md > /dev/null
$PY -m studies.symmetries cells $P/more-seeds/pairs.csv results/symmetries/more-seeds-all.md > /dev/null
$PY -m studies.symmetries cells $P/more-seeds/pairs.csv results/symmetries/more-seeds-new.md \
    --seeds 20-39 > /dev/null
# issue 47's training inside the norm ball, beside the study's sweep seed for seed
$PY -m studies.sweep compare results/extended results/protocols/qk-ball-{0.5,1,4} --seeds 10 \
    --Ts 100,300,1100,3000 --out results/symmetries/qk-ball.md > /dev/null
$PY -m studies.symmetries ball results/extended results/protocols/qk-ball-{0.5,1,4} --seeds 10 \
    --Ts 100,300,1100,3000 --out results/symmetries/qk-ball-seeds.md > /dev/null
$PY -m studies.symmetries ball results/width/d-128 results/protocols/qk-ball-1-d-128 --seeds 10 \
    --Ts 100,300,1100 --out results/symmetries/qk-ball-d-128.md > /dev/null
# issue 52: training inside the capacity bound's class, beside the study on the same seeds and
# kernel; and the kernel's noise floor (the study's seeds again under SkylakeX; issue 60 added
# T = 1100 and 3000)
$PY -m studies.classball results/extended results/class-ball/tight results/class-ball/loose \
    --out results/class-ball/table.md > /dev/null
$PY -m studies.symmetries ball results/extended results/class-ball/ours-skylakex \
    results/class-ball/ours-skylakex-large-T --seeds 20 --Ts 100,300,1100,3000 \
    --out results/class-ball/noise-floor.md > /dev/null
# issue 60: the W_QK ball's slack separated from T (six cells, one T each), the class's cells side
# by side with the study (memorised failures, m50), and the four laws fitted to every seed (the
# class's arms beside the study at d = 64; the study at d = 64 and 128 over their whole range)
$PY -m studies.classball results/extended results/class-ball/slack/c-* --slack \
    --out results/class-ball/slack.md > /dev/null
$PY -m studies.sweep compare results/extended results/class-ball/tight results/class-ball/loose \
    --seeds 20 --Ts 100,300,1100,3000 --out results/class-ball/compare.md > /dev/null
$PY -m studies.sweep laws results/extended results/class-ball/tight results/class-ball/loose \
    --seeds 20 --Ts 100,300,1100,3000,10000 --out results/class-ball/seed-laws.md > /dev/null
$PY -m studies.sweep laws results/extended results/width/d-128 --seeds 20 \
    --out results/extended/seed-laws.md > /dev/null
# issue 47's study on measures of the function: its runs trained again with canonical columns
$PY -m studies.symmetries canonical results/symmetries/canonical-borderline \
    results/symmetries/canonical-fixed results/symmetries/canonical.md > /dev/null
# issue 46: which arithmetic made each folder (each folder's arithmetic.json, found by
# python -m studies.replay FOLDER --find: no training here), per page and over every folder, and
# the same runs under two kernels (results/arithmetic/README.md)
folders() { find "$@" \( -name sweep.json -o -name steps.json -o -name plan.json \) | xargs -n1 dirname | sort; }
$PY -m studies.replay --table results/arithmetic/folders.md $(folders results) > /dev/null
$PY -m studies.replay --table results/extended/arithmetic.md $(folders results/extended) > /dev/null
$PY -m studies.replay --table results/families/arithmetic.md $(folders results/families) > /dev/null
$PY -m studies.replay --table results/mechanism/arithmetic.md $(folders results/mechanism) > /dev/null
$PY -m studies.replay --table results/mechanism-factors/arithmetic.md $(folders results/mechanism-factors) > /dev/null
$PY -m studies.replay --table results/mechanism-interventions/arithmetic.md $(folders results/mechanism-interventions) > /dev/null
$PY -m studies.replay --table results/mechanism-trajectories/arithmetic.md $(folders results/mechanism-trajectories) > /dev/null
$PY -m studies.replay --table results/mechanism-trajectories-T/arithmetic.md $(folders results/mechanism-trajectories-T) > /dev/null
$PY -m studies.replay --table results/paper/arithmetic.md $(folders results/paper) > /dev/null
$PY -m studies.replay --table results/paper-range-ours/arithmetic.md $(folders results/paper-range-ours) > /dev/null
$PY -m studies.replay --table results/paper-range-paper-data/arithmetic.md $(folders results/paper-range-paper-data) > /dev/null
$PY -m studies.replay --table results/parity/arithmetic.md $(folders results/parity) > /dev/null
$PY -m studies.replay --table results/protocols/arithmetic.md $(folders results/protocols) > /dev/null
$PY -m studies.replay --table results/width/arithmetic.md $(folders results/width) > /dev/null
$PY -m studies.kernels results/mechanism results/mechanism-factors \
    --out results/arithmetic/mechanism-kernels.md > /dev/null
$PY -m studies.sweep pages $( { ls README.md; find results -name '*.md' | sort; } | xargs grep -l '^<!-- begin ' ) > /dev/null
echo "done: git diff --stat shows what changed"
