# HCOMM_CHECK_MPIFORT: the MPI Fortran wrapper for the Fortran tests of
# libhcomm_mpi.so (MPIFORT=... overrides). By default the wrapper of the
# same MPI as the C compiler: mpicc -> mpifort, mpicc.mpich -> mpifort.mpich.
# Defines the conditionals HAVE_MPIFORT (mpif.h programs build) and
# HAVE_MPI_F08 (`use mpi_f08` programs build); without them the Fortran
# tests are skipped with a message.
AC_DEFUN([HCOMM_CHECK_MPIFORT], [
  AC_ARG_VAR([MPIFORT], [MPI Fortran compiler wrapper (Fortran tests only)])
  AC_ARG_VAR([MPIFORT_FLAGS], [flags for MPIFORT (default: -O2)])
  : ${MPIFORT_FLAGS=-O2}
  AS_IF([test -z "$MPIFORT"], [
    # CC when it is the MPI wrapper (CC=mpicc.mpich), else the one found.
    hcomm_cc_word=`echo "$CC" | sed 's/ .*//'`
    AS_CASE([$hcomm_cc_word], [*mpicc*], [],
      [hcomm_cc_word=`echo "$MPICC" | sed 's/ .*//'`])
    hcomm_fc_guess=`echo "$hcomm_cc_word" | sed 's/mpicc/mpifort/'`
    AS_IF([test "x$hcomm_fc_guess" = "x$hcomm_cc_word"],
      [AC_PATH_PROGS([MPIFORT], [mpifort mpif90], [])],
      [AS_CASE([$hcomm_fc_guess],
        [*/*], [AS_IF([test -x "$hcomm_fc_guess"], [MPIFORT=$hcomm_fc_guess])],
        [AC_PATH_PROGS([MPIFORT], [$hcomm_fc_guess], [])])])
  ])
  hcomm_have_mpifort=no
  MPIFORT_F77_FLAGS=
  hcomm_have_mpi_f08=no
  AS_IF([test -n "$MPIFORT"], [
    AC_MSG_CHECKING([whether $MPIFORT builds mpif.h programs])
    # mpif.h declares no interfaces: one routine gets buffers of several
    # types, which gfortran >= 10 refuses unless told otherwise.
    cat > conftest_f77.f90 <<_HCOMM_EOF
program t
  implicit none
  include 'mpif.h'
  integer :: ierr, i(2)
  real :: r(2)
  call MPI_INIT(ierr)
  call MPI_BCAST(i, 2, MPI_INTEGER, 0, MPI_COMM_WORLD, ierr)
  call MPI_BCAST(r(1), 1, MPI_REAL, 0, MPI_COMM_WORLD, ierr)
  call MPI_FINALIZE(ierr)
end program t
_HCOMM_EOF
    for hcomm_flag in "" -fallow-argument-mismatch; do
      AS_IF([$MPIFORT $MPIFORT_FLAGS $hcomm_flag -o conftest_f77 conftest_f77.f90 >&AS_MESSAGE_LOG_FD 2>&1],
        [hcomm_have_mpifort=yes; MPIFORT_F77_FLAGS=$hcomm_flag; break])
    done
    AC_MSG_RESULT([$hcomm_have_mpifort${MPIFORT_F77_FLAGS:+ (with $MPIFORT_F77_FLAGS)}])
    AC_MSG_CHECKING([whether $MPIFORT builds mpi_f08 programs])
    cat > conftest_f08.f90 <<_HCOMM_EOF
program t
  use mpi_f08
  implicit none
  call MPI_Init()
  call MPI_Finalize()
end program t
_HCOMM_EOF
    AS_IF([test "x$hcomm_have_mpifort" = xyes &&
           $MPIFORT $MPIFORT_FLAGS -o conftest_f08 conftest_f08.f90 >&AS_MESSAGE_LOG_FD 2>&1],
      [hcomm_have_mpi_f08=yes])
    AC_MSG_RESULT([$hcomm_have_mpi_f08])
    rm -f conftest_f77* conftest_f08*
  ])
  AC_SUBST([MPIFORT_F77_FLAGS])
  AM_CONDITIONAL([HAVE_MPIFORT], [test "x$hcomm_have_mpifort" = xyes])
  AM_CONDITIONAL([HAVE_MPI_F08], [test "x$hcomm_have_mpi_f08" = xyes])
])
