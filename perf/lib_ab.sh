#!/bin/bash
# Compares builds of libhcomm on one benchmark, the library alone swapped:
# hcomm_perf runs once per library, rank count and collective in each
# rotation, the libraries in turn forward, then backward, so that a slow
# spell of a shared machine falls on each alike. Then lib_ab.py prints, per
# size, each library's median HCOMM time, its time over the first
# library's, and MPI's median over all the runs.
#
#   perf/lib_ab.sh OUT "NAME=LIBDIR ..." "RANKS ..." "COLLECTIVES ..." [hcomm_perf args]
#
# LIBDIR holds a libhcomm.so.0 (a build's .libs). OUT gets runs.jsonl (every
# run's rows, with the library and rotation), table.txt and a log per run.
# Environment: ROTATIONS (4), HCOMM_PERF (the hcomm_perf program itself,
# not libtool's wrapper, which would put its own build first; default
# build/perf/.libs/hcomm_perf), MPIRUN (mpirun: Open MPI's or MPICH's),
# MPI_FLAGS (--bind-to core --map-by core), RUN_TIMEOUT (seconds a run
# may take, 300).
set -u
if [ $# -lt 4 ]; then
    echo "usage: $0 OUT \"NAME=LIBDIR ...\" \"RANKS ...\" \"COLLECTIVES ...\" [hcomm_perf args]" >&2
    exit 2
fi
out=$1 libs=$2 ranks=$3 colls=$4
shift 4
here=$(cd "$(dirname "$0")" && pwd)
perf=${HCOMM_PERF:-$here/../build/perf/.libs/hcomm_perf}
flags=${MPI_FLAGS---bind-to core --map-by core}
# Open MPI's mpirun passes a variable to the ranks only when named (-x);
# MPICH's Hydra passes the whole environment.
pass_path=
"${MPIRUN:-mpirun}" --version 2>&1 | grep -q "Open MPI" && pass_path="-x LD_LIBRARY_PATH"
[ -x "$perf" ] || { echo "lib_ab: no hcomm_perf program at $perf" >&2; exit 2; }
resolved=''
for l in $libs; do
    name=${l%%=*} dir=${l#*=}
    case $name in
    '' | *[!A-Za-z0-9_.-]*)
        echo "lib_ab: \"$l\": a name of letters, digits, '_', '.' or '-' goes before '='" >&2
        exit 2
        ;;
    esac
    [ -e "$dir/libhcomm.so.0" ] || { echo "lib_ab: $name: no libhcomm.so.0 in $dir" >&2; exit 2; }
    resolved="$resolved $name=$(cd "$dir" && pwd)" # absolute, for the ranks
done
mkdir -p "$out" || exit 2
: >"$out/runs.jsonl"
failed=0
for r in $(seq "${ROTATIONS:-4}"); do
    order=$resolved
    # shellcheck disable=SC2086 # one library a line
    [ $((r % 2)) = 0 ] && order=$(printf '%s\n' $resolved | tac)
    for l in $order; do
        name=${l%%=*} dir=${l#*=}
        for n in $ranks; do
            for c in $colls; do
                log="$out/$c.$n.$name.$r.log"
                # shellcheck disable=SC2086
                LD_LIBRARY_PATH=$dir${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH} \
                    timeout "${RUN_TIMEOUT:-300}" "${MPIRUN:-mpirun}" $flags \
                    $pass_path -np "$n" "$perf" "$c" "$@" --json \
                    >"$log" 2>&1
                rc=$?
                if [ $rc -ne 0 ]; then
                    echo "lib_ab: $name, $n ranks, $c: exit $rc (see $log)" >&2
                    failed=$((failed + 1))
                fi
                sed -n "s/^{/{\"lib\":\"$name\",\"rotation\":$r,/p" "$log" \
                    >>"$out/runs.jsonl"
            done
        done
    done
done
# shellcheck disable=SC2046,SC2086 # the names, first the baseline
python3 "$here/lib_ab.py" "$out/runs.jsonl" $(printf '%s\n' $resolved | sed 's/=.*//') \
    >"$out/table.txt" ||
    failed=$((failed + 1))
cat "$out/table.txt"
[ "$failed" -eq 0 ]
