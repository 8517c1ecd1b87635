#!/bin/sh
# Installs what HCOMM needs on Debian/Ubuntu (when missing), then configures
# and builds it in ./build, test programs too (make check then only runs
# them; it would build them one at a time). gfortran builds the Fortran
# tests of libhcomm_mpi.so; MPICH is the second MPI ABI CI builds it for
# (Open MPI stays the default mpicc and mpirun). Debian's python3 with
# NumPy, mpi4py and PyTorch (1.13, CPU: 77 MB, a minute to install) runs
# the tests of the Python package; gnuplot draws hcomm_sim's plots,
# matplotlib hcomm_prof's.
# Extra configure options: CONFIGURE_FLAGS.
set -eu
cd "$(dirname "$0")"
packages="build-essential autoconf automake libtool pkg-config
  openmpi-bin libopenmpi-dev libucx-dev libhwloc-dev libjansson-dev libcmocka-dev
  gfortran mpich libmpich-dev python3-numpy python3-mpi4py python3-torch
  python3-matplotlib gnuplot-nox"
missing=
for p in $packages; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" ||
        missing="$missing $p"
done
if [ -n "$missing" ]; then
    sudo=
    [ "$(id -u)" -eq 0 ] || sudo=sudo
    echo "bootstrap: installing$missing"
    $sudo apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq $missing
fi
[ -x configure ] || ./autogen.sh
mkdir -p build
cd build
[ -f Makefile ] || ../configure ${CONFIGURE_FLAGS:-}
make -j"$(nproc)"
# in a make of its own: all runs a make of its own, which would build
# the objects the two share at the same time
make -j"$(nproc)" check-programs
