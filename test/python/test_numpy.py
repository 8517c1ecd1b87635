"""The hcomm package on NumPy arrays and other buffer-protocol objects:
every collective x data type (x operation) in place and not, blocking and
non-blocking, communicators, and bad input. Run under mpirun at any rank
count; exits 1 if a check failed on this rank."""

import array
import sys

import numpy as np

import hcomm

comm = hcomm.Comm.world()
rank, size = comm.rank, comm.size
failures = []
checks = 0


def check(ok, what):
    global checks
    checks += 1
    if not ok:
        failures.append(what)
        print(f"rank {rank}: FAILED {what}", file=sys.stderr)


DTYPES = ["int8", "uint8", "int32", "uint32", "int64", "uint64", "float16",
          "float32", "float64", "bfloat16"]
OPS = ["sum", "prod", "max", "min", "avg"]
COUNTS = [0, 1, 7, 1000]
FORMS = [(True, False), (False, False), (True, True), (False, True)]


def values(op, r, n):
    """Rank r's input: small integers, so every result is exact."""
    i = np.arange(n)
    if op == "prod":
        return np.array([1, 2, 1, 1, 2])[(r + i) % 5]
    if op in ("max", "min"):
        return (r * 13 + i * 5) % 17
    return (r * 7 + i * 3) % 11


def to_np(dtype, v):
    """The array HCOMM sees (bfloat16: uint16 bit patterns)."""
    if dtype == "bfloat16":
        return (np.asarray(v, np.float32).view(np.uint32) >> 16).astype(
            np.uint16)
    return np.asarray(v).astype(dtype)


def from_np(dtype, a):
    if dtype == "bfloat16":
        return (a.astype(np.uint32) << 16).view(np.float32)
    return a


def expected(op, dtype, n, ranks=None):
    ranks = range(size) if ranks is None else ranks
    vs = np.array([values(op, r, n) for r in ranks], dtype=np.float64)
    vs = vs.reshape(len(ranks), n)
    out = {"sum": vs.sum(0), "prod": vs.prod(0), "max": vs.max(0),
           "min": vs.min(0), "avg": vs.sum(0) / len(ranks)}[op]
    return np.trunc(out) if "int" in dtype else out


def same(dtype, got, want):
    got = from_np(dtype, got).astype(np.float64)
    return got.shape == want.shape and np.allclose(got, want, rtol=1e-2,
                                                   atol=0)


def kw(dtype):
    return {"dtype": "bfloat16"} if dtype == "bfloat16" else {}


def test_allreduce():
    for dtype in DTYPES:
        for op in OPS:
            for n in COUNTS:
                want = expected(op, dtype, n)
                # Every form at one count, blocking in place at the others.
                for inplace, nb in (FORMS if n == 7 else FORMS[:1]):
                    x = to_np(dtype, values(op, rank, n))
                    y = x if inplace else np.zeros_like(x)
                    f = comm.iallreduce if nb else comm.allreduce
                    res = f(x, None if inplace else y, op, **kw(dtype))
                    if nb:
                        res = res.wait()
                    check(res is y and same(dtype, y, want),
                          f"allreduce {dtype} {op} n={n} "
                          f"inplace={inplace} nb={nb}: {y}")


def test_reduce_scatter():
    for dtype in DTYPES:
        for op in OPS:
            for n in (0, 1, 5):
                want = expected(op, dtype, n * size)[rank * n:(rank + 1) * n]
                for inplace in (True, False):
                    x = to_np(dtype, values(op, rank, n * size))
                    if inplace:
                        comm.reduce_scatter(x, hcomm.IN_PLACE, op,
                                            **kw(dtype))
                        y = x[rank * n:(rank + 1) * n]
                    else:
                        y = comm.ireduce_scatter(
                            x, np.zeros(n, x.dtype), op, **kw(dtype)).wait()
                    check(same(dtype, y, want),
                          f"reduce_scatter {dtype} {op} n={n} "
                          f"inplace={inplace}: {y}")


def test_reduce():
    for dtype in DTYPES:
        for op in OPS:
            for root in range(size):
                want = expected(op, dtype, 9)
                x = to_np(dtype, values(op, rank, 9))
                y = np.zeros_like(x)
                comm.reduce(x, y, op, root, **kw(dtype))
                z = to_np(dtype, values(op, rank, 9))
                comm.ireduce(z, None, op, root=root, **kw(dtype)).wait()
                if rank == root:
                    check(same(dtype, y, want) and same(dtype, z, want),
                          f"reduce {dtype} {op} root={root}: {y} {z}")


def test_data_movement():
    """allgather, broadcast, alltoall, gather, scatter: every type."""
    for dtype in DTYPES:
        for n in (0, 1, 6):
            base = (np.arange(n * size) % 100).astype(np.float64)
            mine = base[rank * n:(rank + 1) * n]
            t = to_np(dtype, mine)
            for nb in (False, True):
                g = comm.iallgather if nb else comm.allgather
                y = g(t, np.zeros(n * size, t.dtype), **kw(dtype))
                y = y.wait() if nb else y
                check(same(dtype, y, base), f"allgather {dtype} n={n}")
            y = np.zeros(n * size, t.dtype)
            y[rank * n:(rank + 1) * n] = t
            comm.allgather(hcomm.IN_PLACE, y, **kw(dtype))
            check(same(dtype, y, base), f"allgather in place {dtype} n={n}")
            for root in range(size):
                b = to_np(dtype, base if rank == root else 0 * base)
                comm.broadcast(b, root, **kw(dtype))
                check(same(dtype, b, base), f"broadcast {dtype} root={root}")
                g = np.zeros(n * size, t.dtype)
                comm.gather(t, g if rank == root else None, root,
                            **kw(dtype))
                if rank == root:
                    check(same(dtype, g, base), f"gather {dtype} {root}")
                s = np.zeros(n, t.dtype)
                comm.iscatter(to_np(dtype, base) if rank == root else None,
                              s, root, **kw(dtype)).wait()
                check(same(dtype, s, mine), f"scatter {dtype} {root}")
                if rank == root:  # the in-place forms at the root
                    g = np.zeros(n * size, t.dtype)
                    g[root * n:(root + 1) * n] = t
                    comm.gather(hcomm.IN_PLACE, g, root, **kw(dtype))
                    check(same(dtype, g, base), f"gather in place {dtype}")
                    s = to_np(dtype, base)
                    comm.scatter(s, hcomm.IN_PLACE, root, **kw(dtype))
                else:
                    comm.gather(t, None, root, **kw(dtype))
                    comm.scatter(None, np.zeros(n, t.dtype), root,
                                 **kw(dtype))
            # alltoall: block j of rank i holds i * 10 + j.
            a = to_np(dtype, np.repeat(rank * 10 + np.arange(size), n))
            want = np.repeat(np.arange(size) * 10 + rank, n).astype(float)
            check(same(dtype, comm.alltoall(a, np.zeros_like(a),
                                            **kw(dtype)), want),
                  f"alltoall {dtype} n={n}")
            comm.ialltoall(a, **kw(dtype)).wait()
            check(same(dtype, a, want), f"alltoall in place {dtype} n={n}")


def test_buffer_kinds():
    """Objects other than ndarrays, and views: the call writes into the
    object's own memory."""
    b = bytearray([rank + 1] * 5)
    comm.allreduce(b, op=hcomm.MAX)
    check(b == bytearray([size] * 5), f"bytearray: {b}")
    a = array.array("i", [rank] * 3)
    comm.allreduce(a)
    check(list(a) == [size * (size - 1) // 2] * 3, f"array.array: {a}")
    big = np.zeros(10, np.float64)
    view = big[2:6]  # a contiguous view: the result lands in big
    view[:] = 1
    comm.allreduce(memoryview(view))
    check(list(big[2:6]) == [size] * 4 and big[0] == 0 and big[9] == 0,
          f"view: {big}")
    raw = np.full(4, rank + 1, np.float32).tobytes()  # read-only bytes
    out = bytearray(16)
    comm.allreduce(raw, out, dtype=hcomm.FLOAT32)
    check(list(np.frombuffer(out, np.float32)) == [size * (size + 1) / 2] * 4,
          f"bytes reinterpreted as float32: {out}")
    x = np.ones((3, 2), np.float32)
    comm.allreduce(x, op="sum")
    check((x == size).all(), "2-d array")


def test_requests():
    reqs = [comm.iallreduce(np.full(100, i, np.int64)) for i in range(8)]
    reqs.append(comm.ibarrier())
    done = [False] * len(reqs)
    while not all(done):
        done = [r.test() for r in reqs]
    check(all(r.test() for r in reqs), "test() after completion")
    check(all((r.result == i * size).all() for i, r in
              enumerate(reqs[:-1])), "iallreduce results")
    reqs = [comm.ibroadcast(np.full(10, rank, np.int32), root=r)
            for r in range(size)]
    hcomm.waitall(reversed(reqs))
    check(all((r.result == i).all() for i, r in enumerate(reqs)), "waitall")
    comm.barrier()


def test_send_recv():
    x = np.arange(5, dtype=np.float64) + rank
    y = np.zeros(5)
    right, left = (rank + 1) % size, (rank - 1) % size
    r = comm.irecv(y, left, tag=3)
    comm.isend(x, right, tag=3).wait()
    r.wait()
    check((y == np.arange(5) + left).all(), f"send/recv ring: {y}")


def test_comms():
    half = comm.split(rank % 2, key=-rank)
    want = [r for r in range(size) if r % 2 == rank % 2]
    check(half.size == len(want) and half.rank == len(want) - 1 -
          want.index(rank), f"split: {half}")
    x = np.array([rank], np.int64)
    half.allreduce(x)
    check(x[0] == sum(want), f"allreduce on split: {x}")
    none = comm.split(-1 if rank == 0 else 0)
    check((none is None) == (rank == 0), "split with color < 0")
    d = comm.dup()
    with d:
        check(d.size == size and d.rank == rank, "dup")
        r1 = d.iallreduce(np.ones(3))
        r2 = comm.iallreduce(np.ones(3))
        check((r2.wait() == size).all() and (r1.wait() == size).all(),
              "two communicators in flight")
    try:
        d.barrier()
        check(False, "a freed communicator must fail")
    except hcomm.HcommError as e:
        check(e.name == "HCOMM_ERR_INVALID_COMM", f"freed comm: {e}")
    half.free()
    if none is not None:
        none.free()
    try:
        from mpi4py import MPI
    except ImportError:
        return
    c = hcomm.Comm.from_mpi4py(MPI.COMM_WORLD.Split(rank % 2, rank))
    check(c.size == len(want), "from_mpi4py")
    y = c.allreduce(np.array([1.0]), np.zeros(1))
    check(y[0] == len(want), f"allreduce on an mpi4py communicator: {y}")
    c.free()


def raises(exc, text, f, *args, **kwargs):
    try:
        f(*args, **kwargs)
    except exc as e:
        check(text in str(e), f"{exc.__name__} says {text!r}: {e}")
        return e
    except Exception as e:
        check(False, f"expected {exc.__name__} ({text}), got {e!r}")
        return None
    check(False, f"expected {exc.__name__} ({text}), nothing raised")
    return None


def test_bad_input():
    x = np.zeros(8, np.float32)
    E = hcomm.HcommError
    raises(TypeError, "exposes no memory", comm.allreduce, [1.0, 2.0])
    raises(TypeError, "no data type for c8", comm.allreduce,
           np.zeros(4, np.complex64))
    raises(TypeError, "no data type for i2", comm.allreduce,
           np.zeros(4, np.int16))
    raises(TypeError, "holds FLOAT32 and the receive buffer FLOAT64",
           comm.allreduce, x, np.zeros(8))
    raises(ValueError, "not C-contiguous", comm.allreduce, x[::2])
    ro = np.zeros(8, np.float32)
    ro.flags.writeable = False
    raises(ValueError, "read-only", comm.allreduce, ro)
    raises(ValueError, "not writable", comm.allreduce, b"abcd")
    raises(ValueError, "holds 4 elements, the call needs 8", comm.allreduce,
           x, np.zeros(4, np.float32))
    raises(ValueError, f"needs {8 * size}", comm.allgather, x,
           np.zeros(8 * size + 1, np.float32))
    raises(ValueError, "not a whole number", comm.allreduce,
           bytearray(6), dtype="float32")
    raises(TypeError, "unknown data type", comm.allreduce, x, dtype="int16")
    raises(ValueError, "unknown operation", comm.allreduce, x, op="xor")
    e = raises(E, "unknown operation 9", comm.allreduce, x, op=9)
    check(e is not None and e.name == "HCOMM_ERR_INVALID_OP" and
          e.status == 3, f"status of a bad op: {e and e.status}")
    e = raises(E, f"root {size} is out of range (communicator of {size})",
               comm.broadcast, x, size)
    check(e is not None and e.name == "HCOMM_ERR_INVALID_ARG" and
          "root" in e.message, "HcommError.message")
    raises(E, "root -1 is out of range", comm.ireduce, x, None, "sum", -1)
    raises(E, "tag 70000 is out of range", comm.send, x, 0, 70000)
    raises(E, "peer", comm.send, x, size)
    buf = np.zeros(8 * size + 1, np.float32)
    raises(E, "overlap", comm.allgather, buf[1:9], buf[:8 * size])
    # Nothing was sent by any of these: the next call matches everywhere.
    y = np.ones(4)
    comm.allreduce(y)
    check((y == size).all(), "a call after the errors")


for t in [test_allreduce, test_reduce_scatter, test_reduce,
          test_data_movement, test_buffer_kinds, test_requests,
          test_send_recv, test_comms, test_bad_input]:
    t()
comm.free()
hcomm.finalize()
if rank == 0 or failures:
    print(f"rank {rank}: test_numpy at {size} ranks: {checks - len(failures)}"
          f" passed, {len(failures)} failed")
sys.exit(1 if failures else 0)
