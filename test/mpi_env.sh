# Sourced by the test scripts that launch ranks: MPIRUN and top_builddir
# default to mpirun and the current directory; under Open MPI, mpi_flags
# lets ranks exceed the cores and yield when idle, and ranks run as root
# (containers and CI). Empty mpi_flags: another MPI (MPICH's Hydra).
: "${MPIRUN:=mpirun}"
: "${top_builddir:=.}"
mpi_flags=
if $MPIRUN --version 2>&1 | grep -q "Open MPI"; then
    mpi_flags="--oversubscribe --bind-to none"
    export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
    export OMPI_MCA_mpi_yield_when_idle=1
fi
