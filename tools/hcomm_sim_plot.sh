#!/bin/sh
# A PNG of predicted time against rank count, one line per algorithm:
# hcomm_sim sweeps node counts 1, 2, 4 ... (8 ranks each by default) at
# each size given, writes JSON, and gnuplot draws it.
#
#   sh ../tools/hcomm_sim_plot.sh OUT.png COLLECTIVE SIZES [hcomm_sim options]
#   sh ../tools/hcomm_sim_plot.sh sim.png allreduce "8 64K 16M 1G" --nodes 2048 --ppn 8
#
# Run from a build directory (tools/hcomm_sim); needs gnuplot and python3.
set -eu
out=$1 coll=$2 sizes=$3
shift 3
sim=${HCOMM_SIM:-tools/hcomm_sim}
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
plots=
n=0
for size in $sizes; do
    "$sim" "$coll" --sweep 1 -b "$size" -e "$size" --json "$@" >"$dir/$n.json"
    # One data file per algorithm: ranks, time (us); rows it could not
    # simulate are left out.
    python3 - "$dir/$n.json" "$dir/$n" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.startswith("{")]
algos = sorted({r["algorithm"] for r in rows})
for a in algos:
    with open("%s.%s.dat" % (sys.argv[2], a), "w") as f:
        for r in rows:
            if r["algorithm"] == a and "time_us" in r:
                f.write("%d %g\n" % (r["ranks"], r["time_us"]))
PY
    n=$((n + 1))
done
n=0
{
    echo "set terminal png size 1400,$((420 * ($(echo $sizes | wc -w) + 1) / 2)) font ',10'"
    echo "set output '$out'"
    echo "set multiplot layout $((($(echo $sizes | wc -w) + 1) / 2)),2"
    echo "set termoption noenhanced; set logscale xy; set grid; set key top left"
    echo "set xlabel 'ranks'; set ylabel 'predicted time (us)'"
    for size in $sizes; do
        echo "set title '$coll, $size'"
        printf 'plot '
        sep=
        for f in "$dir/$n".*.dat; do
            algo=${f#"$dir/$n."}
            algo=${algo%.dat}
            printf "%s'%s' using 1:2 with linespoints title '%s'" "$sep" "$f" "$algo"
            sep=", "
        done
        echo
        n=$((n + 1))
    done
    echo "unset multiplot"
} >"$dir/plot.gp"
gnuplot "$dir/plot.gp"
echo "wrote $out"
