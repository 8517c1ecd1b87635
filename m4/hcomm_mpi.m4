# HCOMM_CHECK_MPI: MPI is required. --with-mpi=DIR takes DIR/bin/mpicc;
# otherwise mpicc from PATH (or CC when it already is an MPI wrapper).
AC_DEFUN([HCOMM_CHECK_MPI], [
  AC_ARG_WITH([mpi],
    [AS_HELP_STRING([--with-mpi=DIR], [MPI installation (DIR/bin/mpicc); required])],
    [], [with_mpi=yes])
  AS_IF([test "x$with_mpi" = xno],
    [AC_MSG_ERROR([HCOMM needs MPI: --without-mpi is not possible])])
  AS_IF([test "x$with_mpi" != xyes],
    [MPICC="$with_mpi/bin/mpicc"],
    [AC_PATH_PROGS([MPICC], [mpicc mpicc.openmpi mpicc.mpich], [])])
  AS_IF([test -z "$CC" && test -n "$MPICC"], [CC="$MPICC"])
])

# HCOMM_CHECK_MPI_WORKS: after AC_PROG_CC, CC must compile and link MPI.
AC_DEFUN([HCOMM_CHECK_MPI_WORKS], [
  AC_CHECK_HEADER([mpi.h], [],
    [AC_MSG_ERROR([mpi.h not found: install libopenmpi-dev (or MPICH) or pass CC=mpicc / --with-mpi=DIR])])
  AC_CHECK_FUNC([PMPI_Init_thread], [],
    [AC_MSG_ERROR([cannot link MPI programs with $CC: pass CC=mpicc or --with-mpi=DIR])])
  AC_MSG_CHECKING([which MPI])
  AC_COMPILE_IFELSE([AC_LANG_PROGRAM([[#include <mpi.h>]],
      [[#ifndef OPEN_MPI
        #error not Open MPI
        #endif]])], [hcomm_mpi_flavor="Open MPI"],
    [AC_COMPILE_IFELSE([AC_LANG_PROGRAM([[#include <mpi.h>]],
        [[#ifndef MPICH
          #error not MPICH
          #endif]])], [hcomm_mpi_flavor="MPICH"], [hcomm_mpi_flavor="other"])])
  AC_MSG_RESULT([$hcomm_mpi_flavor])
  AC_PATH_PROGS([MPIRUN], [mpirun mpiexec], [mpirun], [$(dirname "$MPICC" 2>/dev/null):$PATH])
  AC_SUBST([MPIRUN])
  AC_SUBST([hcomm_mpi_flavor])
])
