! Fortran with mpif.h, ranks describing the same data with different
! datatypes (MPI's type-signature rule): MPI_BCAST, MPI_ALLGATHER and
! MPI_ALLTOALL with MPI_INTEGER on some ranks, one element of a contiguous
! or strided vector type on others, and MPI_BOTTOM with absolute addresses
! on one, the first call on a fresh communicator among them. libhcomm_mpi.so
! must take each call on every rank or on none (a rank taken alone waits
! forever). Rank 0 prints the results; run_preload.sh compares them with a
! run without the preload.
program test_preload_mixed_f77
  implicit none
  include 'mpif.h'
  integer, parameter :: n = 1000
  integer :: ierr, rank, nranks, i, r, k, bad, allbad, comm, root
  integer :: contig, vec, absolute, kind
  integer :: a(2 * n), want(n)
  integer, allocatable :: g(:), s(:)
  integer(kind=MPI_ADDRESS_KIND) :: addr(1)
  integer :: one(1)

  call MPI_INIT(ierr)
  call MPI_COMM_RANK(MPI_COMM_WORLD, rank, ierr)
  call MPI_COMM_SIZE(MPI_COMM_WORLD, nranks, ierr)
  bad = 0
  allocate(g(2 * n * nranks), s(2 * n * nranks))
  call MPI_TYPE_CONTIGUOUS(n, MPI_INTEGER, contig, ierr)
  call MPI_TYPE_COMMIT(contig, ierr)
  call MPI_TYPE_VECTOR(n, 1, 2, MPI_INTEGER, vec, ierr)
  call MPI_TYPE_COMMIT(vec, ierr)
  ! n integers at a's absolute address, used with MPI_BOTTOM
  call MPI_GET_ADDRESS(a, addr(1), ierr)
  one(1) = n
  call MPI_TYPE_CREATE_HINDEXED(1, one, addr, MPI_INTEGER, absolute, ierr)
  call MPI_TYPE_COMMIT(absolute, ierr)

  do k = 0, 3
    ! each rank its own way to say n integers: kind 0 MPI_INTEGER, 1 one
    ! contiguous, 2 one vector (every other integer), 3 MPI_BOTTOM
    kind = mod(rank + k, 4)
    comm = MPI_COMM_WORLD
    if (k == 0) call MPI_COMM_DUP(MPI_COMM_WORLD, comm, ierr)

    ! bcast from rank k (mod the rank count)
    root = mod(k, nranks)
    a = -1
    if (rank == root) then
      call put(a, kind, [(i * 3 + k, i = 1, n)])
    end if
    call bcast_as(kind, a, root, comm)
    want = [(i * 3 + k, i = 1, n)]
    if (any(got(a, kind) /= want)) bad = bad + 1
    if (kind == 2 .and. any(a(2:2 * n:2) /= -1)) bad = bad + 1

    ! allgather: this rank's n integers sent as MPI_INTEGER, one
    ! contiguous, one vector or from MPI_BOTTOM, received as nranks
    ! contiguous elements or n * nranks integers
    a = -1
    call put(a, kind, [(rank * 10000 + i + k, i = 1, n)])
    g = -1
    select case (kind)
    case (0)
      call MPI_ALLGATHER(a, n, MPI_INTEGER, g, 1, contig, comm, ierr)
    case (1)
      call MPI_ALLGATHER(a, 1, contig, g, n, MPI_INTEGER, comm, ierr)
    case (2)
      call MPI_ALLGATHER(a, 1, vec, g, n, MPI_INTEGER, comm, ierr)
    case default
      call MPI_ALLGATHER(MPI_BOTTOM, 1, absolute, g, 1, contig, comm, ierr)
    end select
    do r = 0, nranks - 1
      if (any(g(r * n + 1:r * n + n) /= [(r * 10000 + i + k, i = 1, n)])) &
        bad = bad + 1
    end do

    ! alltoall in place, received as integers or as contiguous elements
    do r = 0, nranks - 1
      s(r * n + 1:r * n + n) = [(rank * 100 + r + i, i = 1, n)]
    end do
    if (mod(kind, 2) == 0) then
      call MPI_ALLTOALL(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, s, n, &
                        MPI_INTEGER, comm, ierr)
    else
      call MPI_ALLTOALL(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, s, 1, contig, &
                        comm, ierr)
    end if
    do r = 0, nranks - 1
      if (any(s(r * n + 1:r * n + n) /= [(r * 100 + rank + i, i = 1, n)])) &
        bad = bad + 1
    end do
    if (comm /= MPI_COMM_WORLD) call MPI_COMM_FREE(comm, ierr)
  end do

  call MPI_TYPE_FREE(contig, ierr)
  call MPI_TYPE_FREE(vec, ierr)
  call MPI_TYPE_FREE(absolute, ierr)
  call MPI_ALLREDUCE(bad, allbad, 1, MPI_INTEGER, MPI_MAX, MPI_COMM_WORLD, ierr)
  if (rank == 0) then
    print '(a, 5i8)', 'bcast', a(1:5)
    print '(a, 5i8)', 'allgather', g(n * nranks - 4:n * nranks)
    print '(a, 5i8)', 'alltoall', s(n * nranks - 4:n * nranks)
    if (allbad == 0) then
      print '(a)', 'test_preload_mixed_f77: ok'
    else
      print '(a)', 'test_preload_mixed_f77: FAILED'
    end if
  end if
  call MPI_FINALIZE(ierr)
  if (allbad /= 0) stop 1

contains

  ! v into a as layout kind lays it out (kind 2: every other integer)
  subroutine put(a, kind, v)
    integer, intent(inout) :: a(:)
    integer, intent(in) :: kind, v(:)
    if (kind == 2) then
      a(1:2 * n:2) = v
    else
      a(1:n) = v
    end if
  end subroutine put

  function got(a, kind) result(v)
    integer, intent(in) :: a(:), kind
    integer :: v(n)
    if (kind == 2) then
      v = a(1:2 * n:2)
    else
      v = a(1:n)
    end if
  end function got

  subroutine bcast_as(kind, a, root, comm)
    integer, intent(in) :: kind, root, comm
    integer, intent(inout) :: a(:)
    integer :: ierr
    select case (kind)
    case (0)
      call MPI_BCAST(a, n, MPI_INTEGER, root, comm, ierr)
    case (1)
      call MPI_BCAST(a, 1, contig, root, comm, ierr)
    case (2)
      call MPI_BCAST(a, 1, vec, root, comm, ierr)
    case default
      call MPI_BCAST(MPI_BOTTOM, 1, absolute, root, comm, ierr)
    end select
  end subroutine bcast_as
end program test_preload_mixed_f77
