#!/bin/sh
# make demo, the README's first command, runs perf/run_demo.sh: it must
# print no warning of HCOMM's own (it once exported HCOMM_PERF, which the
# library greeted with "unknown variable HCOMM_PERF: did you mean
# HCOMM_DEBUG?"). Run here on one size, the way make demo runs it.
set -u
: "${MPIRUN:=mpirun}"
: "${top_builddir:=.}"
: "${top_srcdir:=.}"
err=$(mktemp)
trap 'rm -f "$err"' EXIT
# Any HCOMM_ variable of the caller's would be warned about too.
for v in $(env | sed -n 's/^\(HCOMM_[A-Za-z0-9_]*\)=.*/\1/p'); do unset "$v"; done
MPIRUN=$MPIRUN PERF_BIN=$top_builddir/perf/hcomm_perf \
    timeout 300 sh "$top_srcdir/perf/run_demo.sh" -b 1K -e 1K -n 5 -w 1 \
    2>"$err"
rc=$?
cat "$err"
if [ $rc -ne 0 ]; then
    echo "FAILED: run_demo.sh exited $rc"
    exit 1
fi
if grep -Ei "warn|unknown variable" "$err"; then
    echo "FAILED: make demo printed a warning"
    exit 1
fi
echo "make demo: no warning"
