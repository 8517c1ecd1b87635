"""init/finalize, communicators and requests over libhcomm."""

import atexit
import ctypes
import enum
import weakref

from . import _buffers, _lib
from ._buffers import Buffer
from ._lib import HcommError, calls, check


class Op(enum.IntEnum):
    """hcomm_op_t"""
    SUM = 0
    PROD = 1
    MAX = 2
    MIN = 3
    AVG = 4


class _InPlace:
    def __repr__(self):
        return "hcomm.IN_PLACE"


IN_PLACE = _InPlace()

_state = {"inits": 0, "epoch": 0}
_comms = weakref.WeakSet()
_orphans = []  # requests dropped unfinished, with the memory they use


def init():
    """Initialises HCOMM (and MPI, when nothing has yet). Counted: each
    init needs a finalize; what is left is finalized at exit."""
    check(_lib.hcomm_init(None, None), "hcomm_init")
    _state["inits"] += 1


def finalize():
    """Frees the communicators still open on the last call, then finalizes
    HCOMM (and MPI, if HCOMM initialised it)."""
    if _state["inits"] == 1:
        for r in list(_orphans):
            _lib.hcomm_wait(ctypes.byref(r[0]))
        _orphans.clear()
        for c in list(_comms):
            c.free()
        _state["epoch"] += 1
    check(_lib.hcomm_finalize(), "hcomm_finalize")
    _state["inits"] -= 1


def initialized():
    return bool(_lib.hcomm_initialized())


@atexit.register
def _at_exit():
    while _state["inits"] > 0:
        try:
            finalize()
        except HcommError:
            break


def version():
    return _lib.hcomm_version().decode()


class Request:
    """A non-blocking call in flight. The memory it uses stays alive (and
    its exports held) until wait() or a successful test()."""

    __slots__ = ("_handle", "_keep", "result")

    def __init__(self, handle, keep, result):
        self._handle = handle  # None once complete
        self._keep = keep
        self.result = result  # what wait() returns: the receive buffer

    def wait(self):
        """Completes the call; returns its receive buffer (None for barrier
        and send). Raises HcommError if the call failed."""
        if self._handle is not None:
            st = _lib.hcomm_wait(ctypes.byref(self._handle))
            self._release()
            check(st, "hcomm_wait")
        return self.result

    def test(self):
        """True once complete; raises HcommError if the call failed."""
        if self._handle is None:
            return True
        st = _lib.hcomm_test(ctypes.byref(self._handle))
        if st == _lib.IN_PROGRESS:
            return False
        self._release()
        check(st, "hcomm_test")
        return True

    def _release(self):
        self._handle = self._keep = None

    def __del__(self):
        # HCOMM may still read or write the memory: keep it until finalize.
        if self._handle is not None and self._handle.value:
            _orphans.append((self._handle, self._keep))


def waitall(requests):
    """Waits for every request; raises the first error after waiting for
    the rest."""
    error = None
    for r in requests:
        try:
            r.wait()
        except HcommError as e:
            error = error or e
    if error:
        raise error


def _mpi_comm_world():
    # MPI_COMM_WORLD as hcomm_comm_create takes it: in Open MPI the address
    # of ompi_mpi_comm_world, in MPICH's ABI the int 0x44000000.
    try:
        world = ctypes.c_char.in_dll(_lib.lib, "ompi_mpi_comm_world")
        return ctypes.c_void_p, ctypes.addressof(world)
    except ValueError:
        return ctypes.c_int, 0x44000000


def _collective(body):
    """The blocking method and its non-blocking (hcomm_i*) twin."""
    def blocking(self, *args, **kwargs):
        return body(self, False, *args, **kwargs)

    def nonblocking(self, *args, **kwargs):
        return body(self, True, *args, **kwargs)

    name = body.__name__.lstrip("_")
    blocking.__name__, nonblocking.__name__ = name, "i" + name
    blocking.__doc__ = body.__doc__
    nonblocking.__doc__ = (f"Non-blocking {name}: returns a Request. "
                           f"{body.__doc__}")
    return blocking, nonblocking


def _op(op):
    # Names ("sum") are looked up; numbers go to HCOMM, which names a bad
    # one in its HCOMM_ERR_INVALID_OP message.
    if isinstance(op, str):
        try:
            return Op[op.upper()]
        except KeyError:
            raise ValueError(f"unknown operation {op!r}") from None
    return int(op)


def _same(a, b, what):
    if a.dtype != b.dtype:
        raise TypeError(f"{what}: the send buffer holds {a.dtype.name} and "
                        f"the receive buffer {b.dtype.name}")


def _need(buf, count, what):
    if buf.count != count:
        raise ValueError(f"{what}: holds {buf.count} elements, the call "
                         f"needs {count}")


def _blocks(buf, size, what):
    if buf.count % size:
        raise ValueError(f"{what}: {buf.count} elements are not {size} "
                         f"equal blocks (one per rank)")
    return buf.count // size


class Comm:
    """An HCOMM communicator. Collectives take any object exposing its
    memory (NumPy, CuPy, torch, bytearray, ...), contiguous, and work on
    that memory; element counts and types come from the buffers."""

    def __init__(self, handle):
        self._h = ctypes.c_void_p(handle)
        self._epoch = _state["epoch"]
        r, s = ctypes.c_int(), ctypes.c_int()
        check(_lib.hcomm_comm_rank(self._h, ctypes.byref(r)))
        check(_lib.hcomm_comm_size(self._h, ctypes.byref(s)))
        self.rank, self.size = r.value, s.value
        _comms.add(self)

    @classmethod
    def world(cls):
        """A communicator over MPI_COMM_WORLD (collective)."""
        return cls._create(*_mpi_comm_world())

    @classmethod
    def from_mpi4py(cls, mpi_comm):
        """A communicator over an mpi4py communicator (collective)."""
        from mpi4py import MPI
        ctype = (ctypes.c_void_p if MPI._sizeof(MPI.Comm) == 8
                 else ctypes.c_int)
        return cls._create(ctype, MPI._handleof(mpi_comm))

    @classmethod
    def _create(cls, ctype, handle):
        if not _state["inits"]:
            init()
        _lib.hcomm_comm_create.argtypes = [ctype, _lib._PP]
        out = ctypes.c_void_p()
        check(_lib.hcomm_comm_create(handle, ctypes.byref(out)),
              "hcomm_comm_create")
        return cls(out.value)

    def split(self, color, key=0):
        """Ranks with the same color form a communicator, ordered by key
        then rank; None for color < 0 (collective)."""
        out = ctypes.c_void_p()
        check(_lib.hcomm_comm_split(self._h, color, key, ctypes.byref(out)),
              "hcomm_comm_split")
        return Comm(out.value) if out.value else None

    def dup(self):
        out = ctypes.c_void_p()
        check(_lib.hcomm_comm_dup(self._h, ctypes.byref(out)),
              "hcomm_comm_dup")
        return Comm(out.value)

    def free(self):
        """Frees the communicator (not collective); later calls on it fail
        with HCOMM_ERR_INVALID_COMM."""
        if self._h.value and self._epoch == _state["epoch"]:
            check(_lib.hcomm_comm_free(ctypes.byref(self._h)),
                  "hcomm_comm_free")
        self._h = ctypes.c_void_p()

    def __del__(self):
        try:
            self.free()
        except Exception:  # never from a destructor; freed at finalize
            pass

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.free()

    def __repr__(self):
        return f"<hcomm.Comm rank {self.rank} of {self.size}>"

    # --- the common path of every call ------------------------------------

    def _run(self, name, nb, args, bufs, result, stream):
        # Device memory whose producer named a stream (CUDA array
        # interface, DLPack, torch's current stream) is ordered on it.
        if stream is None:
            for b in bufs:
                if b.cuda and b.stream is not None:
                    stream = b.stream
                    break
        else:
            stream = _buffers.stream_handle(stream)
        if stream is not None:
            name += "_stream"
            st = calls[name](*args, self._h, stream or None)
        elif nb:
            name, req = "i" + name, ctypes.c_void_p()
            st = calls[name](*args, self._h, ctypes.byref(req))
            if not st:
                return Request(req, bufs, result)
        else:
            st = calls[name](*args, self._h)
        if st:
            check(st, "hcomm_" + name)
        return Request(None, None, result) if nb else result

    def _pair(self, sendbuf, recvbuf, dtype, name, stream):
        s = _buffers.get(sendbuf, dtype, recvbuf is None, f"{name} sendbuf",
                         stream)
        if recvbuf is None or recvbuf is sendbuf:
            return s, s
        r = _buffers.get(recvbuf, dtype, True, f"{name} recvbuf", stream)
        _same(s, r, name)
        return s, r

    # --- collectives -------------------------------------------------------

    def _allreduce(self, nb, sendbuf, recvbuf=None, op=Op.SUM, *,
                   dtype=None, stream=None):
        """allreduce(sendbuf, recvbuf=None, op=SUM): recvbuf = op over the
        ranks of sendbuf; in place without recvbuf (or with sendbuf
        IN_PLACE). Returns recvbuf."""
        if sendbuf is IN_PLACE:
            sendbuf = recvbuf
        s, r = self._pair(sendbuf, recvbuf, dtype, "allreduce", stream)
        _need(r, s.count, "allreduce recvbuf")
        return self._run("allreduce", nb, (s.ptr, r.ptr, s.count, s.dtype,
                                           _op(op)), (s, r),
                         recvbuf if recvbuf is not None else sendbuf, stream)

    allreduce, iallreduce = _collective(_allreduce)

    def _allgather(self, nb, sendbuf, recvbuf, *, dtype=None, stream=None):
        """allgather(sendbuf, recvbuf): recvbuf (size blocks) gets every
        rank's sendbuf in rank order; sendbuf IN_PLACE: this rank's block
        of recvbuf is sent. Returns recvbuf."""
        r = _buffers.get(recvbuf, dtype, True, "allgather recvbuf", stream)
        if sendbuf is IN_PLACE:
            count = _blocks(r, self.size, "allgather recvbuf")
            s = Buffer(r.at(self.rank * count), count, r.dtype)
        else:
            s = _buffers.get(sendbuf, dtype, False, "allgather sendbuf",
                             stream)
            _same(s, r, "allgather")
            _need(r, s.count * self.size, "allgather recvbuf")
        return self._run("allgather", nb, (s.ptr, r.ptr, s.count, s.dtype),
                         (s, r), recvbuf, stream)

    allgather, iallgather = _collective(_allgather)

    def _reduce_scatter(self, nb, sendbuf, recvbuf, op=Op.SUM, *,
                        dtype=None, stream=None):
        """reduce_scatter(sendbuf, recvbuf, op=SUM): rank r's recvbuf gets
        block r of op over the ranks' sendbufs (size blocks); recvbuf
        IN_PLACE: the result lands in this rank's block of sendbuf.
        Returns recvbuf (sendbuf in place)."""
        if recvbuf is IN_PLACE:
            s = _buffers.get(sendbuf, dtype, True, "reduce_scatter sendbuf",
                             stream)
            count = _blocks(s, self.size, "reduce_scatter sendbuf")
            r, result = Buffer(s.at(self.rank * count), count, s.dtype), \
                sendbuf
        else:
            s, r = self._pair(sendbuf, recvbuf, dtype, "reduce_scatter",
                              stream)
            count, result = r.count, recvbuf
            _need(s, count * self.size, "reduce_scatter sendbuf")
        return self._run("reduce_scatter", nb, (s.ptr, r.ptr, count,
                                                s.dtype, _op(op)),
                         (s, r), result, stream)

    reduce_scatter, ireduce_scatter = _collective(_reduce_scatter)

    def _broadcast(self, nb, buf, root=0, *, dtype=None, stream=None):
        """broadcast(buf, root=0): every rank's buf gets root's. Returns
        buf."""
        b = _buffers.get(buf, dtype, self.rank != root, "broadcast buf",
                         stream)
        return self._run("broadcast", nb, (b.ptr, b.count, b.dtype, root),
                         (b,), buf, stream)

    broadcast, ibroadcast = _collective(_broadcast)

    def _reduce(self, nb, sendbuf, recvbuf=None, op=Op.SUM, root=0, *,
                dtype=None, stream=None):
        """reduce(sendbuf, recvbuf=None, op=SUM, root=0): root's recvbuf
        gets op over the ranks' sendbufs; in place without recvbuf (or
        with sendbuf IN_PLACE); other ranks' recvbuf is not used. Returns
        recvbuf."""
        if sendbuf is IN_PLACE:
            sendbuf = recvbuf
        if self.rank == root:
            s, r = self._pair(sendbuf, recvbuf, dtype, "reduce", stream)
        else:  # recvbuf is not used
            s = r = _buffers.get(sendbuf, dtype, False, "reduce sendbuf",
                                 stream)
        _need(r, s.count, "reduce recvbuf")
        return self._run("reduce", nb, (s.ptr, r.ptr, s.count, s.dtype,
                                        _op(op), root), (s, r),
                         recvbuf if recvbuf is not None else sendbuf, stream)

    reduce, ireduce = _collective(_reduce)

    def _alltoall(self, nb, sendbuf, recvbuf=None, *, dtype=None,
                  stream=None):
        """alltoall(sendbuf, recvbuf=None): block j of rank i's sendbuf
        becomes block i of rank j's recvbuf; in place without recvbuf.
        Returns recvbuf."""
        s, r = self._pair(sendbuf, recvbuf, dtype, "alltoall", stream)
        count = _blocks(s, self.size, "alltoall sendbuf")
        _need(r, s.count, "alltoall recvbuf")
        return self._run("alltoall", nb, (s.ptr, r.ptr, count, s.dtype),
                         (s, r), recvbuf if recvbuf is not None else sendbuf,
                         stream)

    alltoall, ialltoall = _collective(_alltoall)

    def _gather(self, nb, sendbuf, recvbuf=None, root=0, *, dtype=None,
                stream=None):
        """gather(sendbuf, recvbuf=None, root=0): root's recvbuf (size
        blocks) gets every rank's sendbuf in rank order; at the root,
        sendbuf IN_PLACE sends the root's block of recvbuf. recvbuf is not
        used elsewhere. Returns recvbuf."""
        if self.rank != root:
            s = _buffers.get(sendbuf, dtype, False, "gather sendbuf", stream)
            r = Buffer(None, 0, s.dtype)
        else:
            r = _buffers.get(recvbuf, dtype, True, "gather recvbuf", stream)
            if sendbuf is IN_PLACE:
                count = _blocks(r, self.size, "gather recvbuf")
                s = Buffer(r.at(root * count), count, r.dtype)
            else:
                s = _buffers.get(sendbuf, dtype, False, "gather sendbuf",
                                 stream)
                _same(s, r, "gather")
                _need(r, s.count * self.size, "gather recvbuf")
        return self._run("gather", nb, (s.ptr, r.ptr, s.count, s.dtype,
                                        root), (s, r), recvbuf, stream)

    gather, igather = _collective(_gather)

    def _scatter(self, nb, sendbuf, recvbuf, root=0, *, dtype=None,
                 stream=None):
        """scatter(sendbuf, recvbuf, root=0): rank r's recvbuf gets block r
        of root's sendbuf (size blocks), which is not used elsewhere; at
        the root, recvbuf IN_PLACE leaves the root's block where it is.
        Returns recvbuf."""
        if self.rank != root:
            r = _buffers.get(recvbuf, dtype, True, "scatter recvbuf", stream)
            s = Buffer(None, 0, r.dtype)
            count = r.count
        else:
            s = _buffers.get(sendbuf, dtype, False, "scatter sendbuf", stream)
            count = _blocks(s, self.size, "scatter sendbuf")
            if recvbuf is IN_PLACE:
                r = Buffer(s.at(root * count), count, s.dtype)
            else:
                r = _buffers.get(recvbuf, dtype, True, "scatter recvbuf",
                                 stream)
                _same(s, r, "scatter")
                _need(r, count, "scatter recvbuf")
        return self._run("scatter", nb, (s.ptr, r.ptr, count, s.dtype,
                                         root), (s, r), recvbuf, stream)

    scatter, iscatter = _collective(_scatter)

    def _barrier(self, nb):
        """barrier(): returns once every rank has entered it."""
        return self._run("barrier", nb, (), (), None, None)

    barrier, ibarrier = _collective(_barrier)

    # --- point-to-point ----------------------------------------------------

    def _send(self, nb, buf, peer, tag=0, *, dtype=None, stream=None):
        """send(buf, peer, tag=0): to peer's recv with the same tag
        (0..65535); messages of one (peer, tag) arrive in order."""
        b = _buffers.get(buf, dtype, False, "send buf", stream)
        return self._run("send", nb, (b.ptr, b.count, b.dtype, peer, tag),
                         (b,), None, stream)

    send, isend = _collective(_send)

    def _recv(self, nb, buf, peer, tag=0, *, dtype=None, stream=None):
        """recv(buf, peer, tag=0): fills buf from peer's send with the same
        tag. Returns buf."""
        b = _buffers.get(buf, dtype, True, "recv buf", stream)
        return self._run("recv", nb, (b.ptr, b.count, b.dtype, peer, tag),
                         (b,), buf, stream)

    recv, irecv = _collective(_recv)
