#!/bin/sh
# hcomm_info's GPU link matrix for the GPUs of rank 0's node: as an
# HCOMM_OVERRIDE_TOPO file's "gpu_links" state them; "unknown" between GPUs
# no detection can find (ids no GPU has) and for a GPU without a PCI bus
# id; and a malformed matrix refused with its JSON path. Needs no GPU.
set -u
. "$(dirname "$0")/../mpi_env.sh"
exe=$top_builddir/tools/hcomm_info
flags=$mpi_flags
export HCOMM_TIMEOUT=60
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
failed=0

if ! "$exe" | grep -q "jansson yes"; then
    echo "info_gpu_links: skipped (built without jansson)"
    exit 77
fi

# run NAME FILE: hcomm_info on 2 ranks with FILE as the override, its
# lines from "GPU links" on into $dir/NAME.out, exit status into rc.
run() {
    # shellcheck disable=SC2086
    HCOMM_OVERRIDE_TOPO=$2 timeout 120 $MPIRUN $flags -np 2 "$exe" \
        >"$dir/$1.all" 2>"$dir/$1.err"
    rc=$?
    sed -n '/GPU links/,$p' "$dir/$1.all" >"$dir/$1.out"
}

# expect NAME: the run succeeded and the matrix printed is exactly stdin
expect() {
    [ "$rc" -eq 0 ] || { echo "FAILED: $1: exit $rc"; failed=1; }
    if ! diff -u - "$dir/$1.out"; then
        echo "FAILED: $1: the matrix differs (above)"
        cat "$dir/$1.all" "$dir/$1.err"
        failed=1
    fi
}

cat >"$dir/stated.json" <<'EOF'
{"nodes": [{"name": "n0", "ranks": [0],
            "gpus": ["0000:1b:00.0", "0000:1c:00.0", "cuda2"],
            "gpu_links": [["self", "nvlink", "pcie"],
                          ["nvlink", "self", "none"],
                          ["pcie", "none", "self"]]},
           {"name": "n1", "ranks": [1]}]}
EOF
run stated "$dir/stated.json"
expect stated <<'EOF'
  GPU links on node 0 "n0" (HCOMM_OVERRIDE_TOPO):
             gpu0     gpu1     gpu2
    gpu0     self     nvlink   pcie     0000:1b:00.0
    gpu1     nvlink   self     none     0000:1c:00.0
    gpu2     pcie     none     self     cuda2
EOF

# No "gpu_links": detection's, and no GPU has these ids.
cat >"$dir/detected.json" <<'EOF'
{"nodes": [{"name": "n0", "ranks": [0, 1],
            "gpus": ["ffff:fe:1f.6", "ffff:fe:1f.7", "cuda2"]}]}
EOF
run detected "$dir/detected.json"
expect detected <<'EOF'
  GPU links on node 0 "n0" (detected):
             gpu0     gpu1     gpu2
    gpu0     self     unknown  unknown  ffff:fe:1f.6
    gpu1     unknown  self     unknown  ffff:fe:1f.7
    gpu2     unknown  unknown  self     cuda2
EOF

cat >"$dir/none.json" <<'EOF'
{"nodes": [{"name": "n0", "ranks": [0, 1], "gpus": []}]}
EOF
run none "$dir/none.json"
expect none <<'EOF'
  GPU links on node 0 "n0": no GPUs
EOF

# A link that differs each way: refused on every rank, nothing printed.
cat >"$dir/bad.json" <<'EOF'
{"nodes": [{"ranks": [0, 1], "gpus": ["cuda0", "cuda1"],
            "gpu_links": [["self", "nvlink"], ["pcie", "self"]]}]}
EOF
run bad "$dir/bad.json"
[ $rc -ne 0 ] || { echo "FAILED: bad: exit 0"; failed=1; }
[ ! -s "$dir/bad.out" ] || { echo "FAILED: bad: a matrix printed"; failed=1; }
grep -q 'nodes\[0\]\.gpu_links\[1\]\[0\]: "pcie", but gpu_links\[0\]\[1\] is "nvlink"' \
    "$dir/bad.err" ||
    { echo "FAILED: bad: no JSON path"; cat "$dir/bad.err"; failed=1; }

echo "info_gpu_links: $failed failed"
exit $failed
