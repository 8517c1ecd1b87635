! Fortran with `use mpi_f08`: the collectives libhcomm_mpi.so takes, with
! MPI_IN_PLACE, handle types, the optional ierror given and left out, a
! non-blocking call and a call that must go to MPI.
program test_preload_f08
  use mpi_f08
  implicit none
  integer, parameter :: n = 5
  integer :: ierr, rank, nranks, i, r, bad, allbad
  integer :: ia(n), ib(n)
  real :: ra(n)
  double precision :: da(n)
  integer, allocatable :: ga(:)
  type(MPI_Comm) :: comm
  type(MPI_Request) :: req
  logical :: la, lb

  call MPI_Init()
  call MPI_Comm_rank(MPI_COMM_WORLD, rank)
  call MPI_Comm_size(MPI_COMM_WORLD, nranks)
  call MPI_Comm_dup(MPI_COMM_WORLD, comm)
  bad = 0
  allocate(ga(n * nranks))

  ia = [(rank * 10 + i, i = 1, n)]
  call MPI_Allreduce(ia, ib, n, MPI_INTEGER, MPI_SUM, comm, ierr)
  if (ierr /= MPI_SUCCESS) bad = bad + 1
  do i = 1, n
    if (ib(i) /= 10 * (nranks * (nranks - 1) / 2) + nranks * i) bad = bad + 1
  end do

  ra = [(real(mod(rank + i, 4)), i = 1, n)]
  call MPI_Allreduce(MPI_IN_PLACE, ra, n, MPI_REAL, MPI_MIN, comm)
  do i = 1, n
    if (ra(i) /= real(minval([(mod(r + i, 4), r = 0, nranks - 1)]))) bad = bad + 1
  end do

  da = [(0.5d0 * rank + i, i = 1, n)]
  call MPI_Iallreduce(MPI_IN_PLACE, da, n, MPI_DOUBLE_PRECISION, MPI_SUM, &
                      comm, req)
  call MPI_Wait(req, MPI_STATUS_IGNORE)
  do i = 1, n
    if (da(i) /= 0.5d0 * (nranks * (nranks - 1) / 2) + nranks * i) bad = bad + 1
  end do

  ib = -1
  if (rank == 0) ib = [(i * i, i = 1, n)]
  call MPI_Bcast(ib, n, MPI_INTEGER, 0, comm)
  if (any(ib /= [(i * i, i = 1, n)])) bad = bad + 1

  ia = rank
  call MPI_Reduce(ia, ib, n, MPI_INTEGER, MPI_MAX, 0, comm, ierr)
  if (rank == 0 .and. any(ib /= nranks - 1)) bad = bad + 1

  ga = -1
  ga(rank * n + 1 : rank * n + n) = [(rank * 100 + i, i = 1, n)]
  call MPI_Allgather(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, ga, n, MPI_INTEGER, comm)
  do r = 0, nranks - 1
    if (ga(r * n + 1) /= r * 100 + 1) bad = bad + 1
  end do

  ga = [(rank + i, i = 1, n * nranks)]
  call MPI_Reduce_scatter_block(MPI_IN_PLACE, ga, n, MPI_INTEGER, MPI_SUM, comm)
  do i = 1, n
    if (ga(i) /= nranks * (nranks - 1) / 2 + nranks * (rank * n + i)) bad = bad + 1
  end do

  ga = [(rank * 1000 + i, i = 1, n * nranks)]
  call MPI_Alltoall(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, ga, n, MPI_INTEGER, comm)
  do r = 0, nranks - 1
    if (ga(r * n + 1) /= r * 1000 + rank * n + 1) bad = bad + 1
  end do

  la = .true.
  call MPI_Allreduce(la, lb, 1, MPI_LOGICAL, MPI_LOR, comm)
  if (.not. lb) bad = bad + 1

  call MPI_Barrier(comm)
  call MPI_Allreduce(bad, allbad, 1, MPI_INTEGER, MPI_MAX, comm)
  if (rank == 0) then
    print '(a, 5f8.2)', 'min', ra
    print '(a, 5f8.2)', 'iallreduce', da
    print '(a, 5i6)', 'reduce max', ib
    if (allbad == 0) then
      print '(a)', 'test_preload_f08: ok'
    else
      print '(a)', 'test_preload_f08: FAILED'
    end if
  end if
  call MPI_Comm_free(comm)
  call MPI_Finalize()
  if (allbad /= 0) stop 1
end program test_preload_f08
