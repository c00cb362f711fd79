#!/usr/bin/env bash
# The paper's simulated figures (9-12), one rubberband command each: a chart (PNG) and its data
# (CSV) in this directory. Run from anywhere: examples/paper/whatif/figures.sh (or make figures).
set -euo pipefail
cd "$(dirname "$0")/../../.."
# RB and FIGURES_OUT: another binary, another folder (the test that holds the committed figures
# to what this writes).
rb=${RB:-bin/rubberband}
[ -x "$rb" ] || make build
out=${FIGURES_OUT:-examples/paper/whatif}
p=examples/paper

# Fig. 9: stragglers. sigma of one iteration on one GPU from 1 to 10 s, per-instance and per-function.
$rb whatif $p/fig9-stragglers.yaml --sweep profile.iter_latency.std=1,2,4,6,8,10 -o csv --plot $out/fig9a-per-instance.png > $out/fig9a-per-instance.csv
$rb whatif $p/fig9-stragglers.yaml --sweep profile.iter_latency.std=1,2,4,6,8,10 --sweep cluster.billing.model=per-function \
  --sweep cluster.billing.minimum=0s -o csv --plot $out/fig9b-per-function.png > $out/fig9b-per-function.csv

# Fig. 9, the other way: persistent stragglers. A tenth of the nodes run every trial 1 to 10 times
# slower for their whole life (profile.slow_nodes), with sigma 1 s: each stage waits on its slowest.
$rb whatif $p/fig9-stragglers.yaml --sweep profile.slow_nodes.factor=1,1.5,2,3,5,10 --sweep profile.slow_nodes.share=0.1 \
  --sweep profile.iter_latency.std=1 -o csv --plot $out/fig9c-slow-per-instance.png > $out/fig9c-slow-per-instance.csv
$rb whatif $p/fig9-stragglers.yaml --sweep profile.slow_nodes.factor=1,1.5,2,3,5,10 --sweep profile.slow_nodes.share=0.1 \
  --sweep profile.iter_latency.std=1 --sweep cluster.billing.model=per-function --sweep cluster.billing.minimum=0s \
  -o csv --plot $out/fig9d-slow-per-function.png > $out/fig9d-slow-per-function.csv

# Fig. 10: data price, small (CIFAR-10, 0.15 GB) and large (ImageNet, 150 GB) datasets.
for ds in cifar10 imagenet; do
  $rb whatif $p/fig10-$ds.yaml --sweep cluster.data.price_per_gb=0,0.01,0.02,0.04,0.08,0.16 -o csv --plot $out/fig10-$ds.png > $out/fig10-$ds.csv
done

# Fig. 11: job size, per-instance and per-function, 20-minute deadline.
$rb whatif $p/fig11-jobsize.yaml --sweep algorithm.sha.trials=16,32,64,128,256 -o csv --plot $out/fig11a-per-instance.png > $out/fig11a-per-instance.csv
$rb whatif $p/fig11-jobsize.yaml --sweep algorithm.sha.trials=16,32,64,128,256 --sweep cluster.billing.model=per-function \
  --sweep cluster.billing.minimum=0s -o csv --plot $out/fig11b-per-function.png > $out/fig11b-per-function.csv

# Fig. 12: initialisation latency 1, 10, 100 s; deadline 90 to 160 minutes.
for init in 1 10 100; do
  $rb whatif $p/fig12-init${init}s.yaml --sweep deadline=90m..160m/10m -o csv --plot $out/fig12-init${init}s.png > $out/fig12-init${init}s.csv
done
echo "figures written to $out"
