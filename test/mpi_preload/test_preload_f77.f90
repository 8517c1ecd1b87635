! Fortran with mpif.h: every collective libhcomm_mpi.so takes, with
! Fortran's MPI_IN_PLACE, Fortran types, a non-blocking call and a call
! that must go to MPI (MPI_LAND on MPI_LOGICAL). Rank 0 prints the results;
! run_preload.sh compares them with a run without the preload.
program test_preload_f77
  implicit none
  include 'mpif.h'
  integer, parameter :: n = 6
  integer :: ierr, rank, nranks, i, r, req, root, bad, allbad
  integer :: ia(n), ib(n), want(n)
  real :: ra(n)
  double precision :: da(n), db(n)
  integer, allocatable :: ga(:), gb(:)
  logical :: la, lb

  call MPI_INIT(ierr)
  call MPI_COMM_RANK(MPI_COMM_WORLD, rank, ierr)
  call MPI_COMM_SIZE(MPI_COMM_WORLD, nranks, ierr)
  bad = 0
  allocate(ga(n * nranks), gb(n * nranks))

  ! allreduce, out of place: integer sum
  do i = 1, n
    ia(i) = rank * 10 + i
    want(i) = 10 * (nranks * (nranks - 1) / 2) + nranks * i
  end do
  call MPI_ALLREDUCE(ia, ib, n, MPI_INTEGER, MPI_SUM, MPI_COMM_WORLD, ierr)
  if (any(ib /= want) .or. ierr /= MPI_SUCCESS) bad = bad + 1

  ! allreduce in place: real max, double precision sum
  do i = 1, n
    ra(i) = real(mod(rank * 3 + i, 7))
    da(i) = dble(rank) + 0.25d0 * i
  end do
  call MPI_ALLREDUCE(MPI_IN_PLACE, ra, n, MPI_REAL, MPI_MAX, MPI_COMM_WORLD, ierr)
  call MPI_ALLREDUCE(MPI_IN_PLACE, da, n, MPI_DOUBLE_PRECISION, MPI_SUM, &
                     MPI_COMM_WORLD, ierr)
  do i = 1, n
    if (ra(i) /= real(maxval([(mod(r * 3 + i, 7), r = 0, nranks - 1)]))) bad = bad + 1
    if (da(i) /= dble(nranks * (nranks - 1) / 2) + nranks * 0.25d0 * i) bad = bad + 1
  end do

  ! non-blocking, completed by MPI_WAIT
  ib = rank
  call MPI_IALLREDUCE(MPI_IN_PLACE, ib, n, MPI_INTEGER, MPI_MIN, &
                      MPI_COMM_WORLD, req, ierr)
  call MPI_WAIT(req, MPI_STATUS_IGNORE, ierr)
  if (any(ib /= 0)) bad = bad + 1

  ! bcast from the last rank
  root = nranks - 1
  db = -1
  if (rank == root) db = [(1.5d0 * i, i = 1, n)]
  call MPI_BCAST(db, n, MPI_DOUBLE_PRECISION, root, MPI_COMM_WORLD, ierr)
  if (any(db /= [(1.5d0 * i, i = 1, n)])) bad = bad + 1

  ! reduce to rank 0, in place there
  ia = rank + 1
  if (rank == 0) then
    call MPI_REDUCE(MPI_IN_PLACE, ia, n, MPI_INTEGER, MPI_PROD, 0, &
                    MPI_COMM_WORLD, ierr)
    r = 1
    do i = 1, nranks
      r = r * i
    end do
    if (any(ia /= r)) bad = bad + 1
  else
    call MPI_REDUCE(ia, ib, n, MPI_INTEGER, MPI_PROD, 0, MPI_COMM_WORLD, ierr)
  end if

  ! allgather, out of place then in place
  ia = [(rank * 100 + i, i = 1, n)]
  call MPI_ALLGATHER(ia, n, MPI_INTEGER, ga, n, MPI_INTEGER, MPI_COMM_WORLD, ierr)
  gb = -1
  gb(rank * n + 1 : rank * n + n) = ia
  call MPI_ALLGATHER(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, gb, n, MPI_INTEGER, &
                     MPI_COMM_WORLD, ierr)
  do r = 0, nranks - 1
    do i = 1, n
      if (ga(r * n + i) /= r * 100 + i .or. gb(r * n + i) /= r * 100 + i) bad = bad + 1
    end do
  end do

  ! reduce_scatter_block and alltoall
  ga = [(rank + i, i = 1, n * nranks)]
  call MPI_REDUCE_SCATTER_BLOCK(ga, ib, n, MPI_INTEGER, MPI_SUM, MPI_COMM_WORLD, ierr)
  do i = 1, n
    if (ib(i) /= nranks * (nranks - 1) / 2 + nranks * (rank * n + i)) bad = bad + 1
  end do
  call MPI_ALLTOALL(ga, n, MPI_INTEGER, gb, n, MPI_INTEGER, MPI_COMM_WORLD, ierr)
  do r = 0, nranks - 1
    if (gb(r * n + 1) /= r + rank * n + 1) bad = bad + 1
  end do

  ! a call HCOMM leaves to MPI
  la = rank >= 0
  call MPI_ALLREDUCE(la, lb, 1, MPI_LOGICAL, MPI_LAND, MPI_COMM_WORLD, ierr)
  if (.not. lb) bad = bad + 1

  call MPI_BARRIER(MPI_COMM_WORLD, ierr)
  call MPI_ALLREDUCE(bad, allbad, 1, MPI_INTEGER, MPI_MAX, MPI_COMM_WORLD, ierr)
  if (rank == 0) then
    print '(a, 6i6)', 'allreduce', want
    print '(a, 6f8.2)', 'max', ra
    print '(a, 6f8.2)', 'sum', da
    print '(a, 6f8.2)', 'bcast', db
    print '(a, 6i6)', 'reduce_scatter_block', ib
    if (allbad == 0) then
      print '(a)', 'test_preload_f77: ok'
    else
      print '(a)', 'test_preload_f77: FAILED'
    end if
  end if
  call MPI_FINALIZE(ierr)
  if (allbad /= 0) stop 1
end program test_preload_f77
