! Fortran with mpif.h: the calls libhcomm_mpi.so took in issue 13, gather,
! scatter, the variable-count ones and non-blocking forms, with Fortran's
! MPI_IN_PLACE and counts that differ per rank (rank r has r + 1 ints, but
! rank 1 none). Rank 0 prints; run_preload.sh compares the output
! with a run without the preload.
program test_preload_vf77
  implicit none
  include 'mpif.h'
  integer :: ierr, rank, nranks, i, r, req, bad, allbad, total, mine, before
  integer, allocatable :: cnt(:), dsp(:), sc(:), sd(:), a(:), b(:), w(:)

  call MPI_INIT(ierr)
  call MPI_COMM_RANK(MPI_COMM_WORLD, rank, ierr)
  call MPI_COMM_SIZE(MPI_COMM_WORLD, nranks, ierr)
  bad = 0
  allocate(cnt(nranks), dsp(nranks), sc(nranks), sd(nranks))
  ! rank r's block: r + 1 ints (rank 1 none), packed
  total = 0
  do r = 0, nranks - 1
    cnt(r + 1) = merge(0, r + 1, r == 1)
    dsp(r + 1) = total
    total = total + cnt(r + 1)
  end do
  mine = cnt(rank + 1)
  before = dsp(rank + 1)
  ! at least 3 a rank: the gather and scatter below move 3
  allocate(a(max(total, 3) * nranks), b(max(total, 3) * nranks), w(max(total, 1)))

  ! allgatherv in place
  b = -1
  do i = 1, mine
    b(before + i) = rank * 100 + i
  end do
  call MPI_ALLGATHERV(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, b, cnt, dsp, &
                      MPI_INTEGER, MPI_COMM_WORLD, ierr)
  do r = 0, nranks - 1
    do i = 1, cnt(r + 1)
      if (b(dsp(r + 1) + i) /= r * 100 + i) bad = bad + 1
    end do
  end do

  ! iallgatherv out of place, waited for
  a(1:max(mine, 1)) = [(rank * 100 + i, i = 1, max(mine, 1))]
  b = -1
  call MPI_IALLGATHERV(a, mine, MPI_INTEGER, b, cnt, dsp, MPI_INTEGER, &
                       MPI_COMM_WORLD, req, ierr)
  call MPI_WAIT(req, MPI_STATUS_IGNORE, ierr)
  do r = 0, nranks - 1
    do i = 1, cnt(r + 1)
      if (b(dsp(r + 1) + i) /= r * 100 + i) bad = bad + 1
    end do
  end do

  ! reduce_scatter in place: the sum of every rank's (rank + index)
  a(1:total) = [(rank + i, i = 1, total)]
  call MPI_REDUCE_SCATTER(MPI_IN_PLACE, a, cnt, MPI_INTEGER, MPI_SUM, &
                          MPI_COMM_WORLD, ierr)
  do i = 1, mine
    if (a(i) /= nranks * (nranks - 1) / 2 + nranks * (before + i)) bad = bad + 1
  end do
  w(1:max(mine, 1)) = a(1:max(mine, 1))

  ! alltoallv: rank q sends rank p (p + q) mod 3 ints of value q * 10 + p
  do r = 0, nranks - 1
    sc(r + 1) = mod(r + rank, 3)
  end do
  sd(1) = 0
  do r = 2, nranks
    sd(r) = sd(r - 1) + sc(r - 1)
  end do
  do r = 0, nranks - 1
    a(sd(r + 1) + 1 : sd(r + 1) + sc(r + 1)) = rank * 10 + r
  end do
  b = -1
  call MPI_ALLTOALLV(a, sc, sd, MPI_INTEGER, b, sc, sd, MPI_INTEGER, &
                     MPI_COMM_WORLD, ierr)
  do r = 0, nranks - 1
    do i = 1, sc(r + 1)
      if (b(sd(r + 1) + i) /= r * 10 + rank) bad = bad + 1
    end do
  end do

  ! gather to the last rank, scatter back from it (non-blocking)
  a(1:3) = [rank, rank * 2, rank * 3]
  b = -1
  call MPI_GATHER(a, 3, MPI_INTEGER, b, 3, MPI_INTEGER, nranks - 1, &
                  MPI_COMM_WORLD, ierr)
  if (rank == nranks - 1) then
    do r = 0, nranks - 1
      if (any(b(3 * r + 1 : 3 * r + 3) /= [r, r * 2, r * 3])) bad = bad + 1
    end do
  end if
  a(1:3) = -1
  call MPI_ISCATTER(b, 3, MPI_INTEGER, a, 3, MPI_INTEGER, nranks - 1, &
                    MPI_COMM_WORLD, req, ierr)
  call MPI_WAIT(req, MPI_STATUS_IGNORE, ierr)
  if (any(a(1:3) /= [rank, rank * 2, rank * 3])) bad = bad + 1

  call MPI_IBARRIER(MPI_COMM_WORLD, req, ierr)
  call MPI_WAIT(req, MPI_STATUS_IGNORE, ierr)
  call MPI_ALLREDUCE(bad, allbad, 1, MPI_INTEGER, MPI_MAX, MPI_COMM_WORLD, ierr)
  if (rank == 0) then
    print '(a, 6i6)', 'allgatherv', b(1:min(6, total))
    if (allbad == 0) then
      print '(a)', 'test_preload_vf77: ok'
    else
      print '(a)', 'test_preload_vf77: FAILED'
    end if
  end if
  call MPI_FINALIZE(ierr)
  if (allbad /= 0) stop 1
end program test_preload_vf77
