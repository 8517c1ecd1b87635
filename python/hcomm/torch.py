"""hcomm.torch: torch.distributed's collectives, a DDP communication hook
and a torch.distributed backend, all over HCOMM.

    import hcomm.torch as ht
    ht.init_process_group()          # MPI finds the ranks (mpirun -np N)
    ht.all_reduce(t)                 # in place, as torch.distributed's
    ddp.register_comm_hook(None, ht.allreduce_hook)

The calls work on the tensors' memory. CUDA tensors are ordered on the
current stream: the collective starts after the work queued on it, and
(as hcomm.h says of the *_stream calls for now) returns once it is done.
init_process_group() also initialises torch.distributed (backend "hcomm",
or "gloo" for DDP's own traffic when asked), so DDP and dist.* work too.
"""

import datetime
import os
import socket

import torch
import torch.distributed as dist

from . import _comm
from ._comm import IN_PLACE, Comm, Op

ReduceOp = dist.ReduceOp
_OPS = [(ReduceOp.SUM, Op.SUM), (ReduceOp.PRODUCT, Op.PROD),
        (ReduceOp.MIN, Op.MIN), (ReduceOp.MAX, Op.MAX)]
if hasattr(ReduceOp, "AVG"):
    _OPS.append((ReduceOp.AVG, Op.AVG))

_world = None  # the Comm over MPI_COMM_WORLD, once made


def _hcomm_op(op):
    if isinstance(op, Op):
        return op
    for theirs, ours in _OPS:
        if op == theirs:
            return ours
    raise ValueError(f"hcomm: reduction {op} is not supported (SUM, "
                     f"PRODUCT, MIN, MAX, AVG)")


def world():
    """The Comm over every rank of the MPI job (made on first use)."""
    global _world
    if _world is None or not _world._h.value:
        _world = Comm.world()
    return _world


def _comm_of(group):
    if group is None or group is getattr(dist.group, "WORLD", None):
        if _world is None:
            raise RuntimeError("hcomm.torch: call init_process_group() "
                               "first")
        return _world
    if isinstance(group, Comm):
        return group
    if isinstance(group, ProcessGroupHCOMM):
        return group.comm
    raise TypeError(f"hcomm.torch: group must be None, an hcomm.Comm or a "
                    f"group of the hcomm backend, not {type(group).__name__}")


class Work:
    """What async_op=True returns: wait() completes the call."""

    def __init__(self, request=None, result=None, then=None):
        self._request, self._result, self._then = request, result, then

    def wait(self, timeout=None):
        if self._request is not None:
            self._request.wait()
            self._request = None
        if self._then is not None:
            self._then()
            self._then = None
        return True

    def is_completed(self):
        if self._request is not None and not self._request.test():
            return False
        self.wait()
        return True

    def is_success(self):
        return self.is_completed()

    def result(self):
        return self._result

    def get_future(self):
        self.wait()
        fut = torch.futures.Future()
        fut.set_result(self._result)
        return fut


def _start(comm, name, async_op, *args, result=None, then=None, **kwargs):
    """Runs comm.name (or its non-blocking twin) and wraps the outcome."""
    if async_op:
        return Work(getattr(comm, "i" + name)(*args, **kwargs), result, then)
    getattr(comm, name)(*args, **kwargs)
    if then is not None:
        then()
    return None


def _flat(tensors):
    """The one tensor that tensors are consecutive views of, else None."""
    first = tensors[0]
    step = first.numel() * first.element_size()
    for i, t in enumerate(tensors):
        if (not t.is_contiguous() or t.dtype != first.dtype or
                t.numel() != first.numel() or
                t.data_ptr() != first.data_ptr() + i * step):
            return None
    try:  # torch refuses a view past the end of first's storage
        return first.as_strided((len(tensors) * first.numel(),), (1,))
    except RuntimeError:
        return None


# --- torch.distributed's functions ------------------------------------------

def all_reduce(tensor, op=ReduceOp.SUM, group=None, async_op=False):
    """In place: tensor becomes op over the ranks' tensors."""
    return _start(_comm_of(group), "allreduce", async_op, tensor, None,
                  _hcomm_op(op), result=[tensor])


def broadcast(tensor, src, group=None, async_op=False):
    """tensor of rank src to every rank, in place."""
    return _start(_comm_of(group), "broadcast", async_op, tensor, src,
                  result=[tensor])


def all_gather_into_tensor(output_tensor, input_tensor, group=None,
                           async_op=False):
    """output_tensor (size x input's elements) gets every rank's input."""
    return _start(_comm_of(group), "allgather", async_op, input_tensor,
                  output_tensor, result=[output_tensor])


def all_gather(tensor_list, tensor, group=None, async_op=False):
    """tensor_list[r] gets rank r's tensor. Without a copy when the list
    is consecutive views of one tensor (torch.chunk of it); else through
    one flat tensor, copied out."""
    flat = _flat(tensor_list)
    if flat is not None:
        return all_gather_into_tensor(flat, tensor, group, async_op)
    flat = tensor.new_empty((len(tensor_list) * tensor.numel(),))

    def copy_out():
        for t, part in zip(tensor_list, flat.chunk(len(tensor_list))):
            t.copy_(part.view_as(t))
    return _start(_comm_of(group), "allgather", async_op, tensor, flat,
                  result=tensor_list, then=copy_out)


def reduce_scatter_tensor(output, input, op=ReduceOp.SUM, group=None,
                          async_op=False):
    """output gets this rank's block of op over the ranks' inputs."""
    return _start(_comm_of(group), "reduce_scatter", async_op, input, output,
                  _hcomm_op(op), result=[output])


def reduce_scatter(output, input_list, op=ReduceOp.SUM, group=None,
                   async_op=False):
    """output gets op over the ranks' input_list[rank]."""
    flat = _flat(input_list)
    if flat is None:
        flat = torch.cat([t.reshape(-1) for t in input_list])
    return reduce_scatter_tensor(output, flat, op, group, async_op)


def reduce(tensor, dst, op=ReduceOp.SUM, group=None, async_op=False):
    """tensor of rank dst becomes op over the ranks' tensors."""
    return _start(_comm_of(group), "reduce", async_op, tensor, None,
                  _hcomm_op(op), dst, result=[tensor])


def barrier(group=None, async_op=False, device_ids=None):
    return _start(_comm_of(group), "barrier", async_op)


def get_rank(group=None):
    return _comm_of(group).rank


def get_world_size(group=None):
    return _comm_of(group).size


# --- DDP -----------------------------------------------------------------

def allreduce_hook(state, bucket):
    """DDP communication hook: averages each gradient bucket with HCOMM,
    in place. state: None (every rank) or an hcomm.Comm.

        ddp_model.register_comm_hook(None, hcomm.torch.allreduce_hook)
    """
    tensor = bucket.buffer()
    _comm_of(state).allreduce(tensor, op=Op.AVG)
    fut = torch.futures.Future(devices=[tensor.device] if tensor.is_cuda
                               else None)
    fut.set_result(tensor)
    return fut


# --- torch.distributed.init_process_group(backend="hcomm") -------------

def _rendezvous(url, timeout=datetime.timedelta(minutes=5), **kwargs):
    """init_method "hcomm://": ranks from MPI, and a TCPStore (which
    torch.distributed needs) on rank 0, its address broadcast by HCOMM."""
    comm = world()
    names = bytearray(64 * comm.size)
    mine = socket.gethostname().encode()[:63]
    names[64 * comm.rank:64 * comm.rank + len(mine)] = mine
    comm.allgather(IN_PLACE, names)
    one_host = len({bytes(names[i:i + 64]) for i in
                    range(0, len(names), 64)}) == 1
    addr = bytearray(128)
    if comm.rank == 0:
        host = os.environ.get("MASTER_ADDR") or (
            "127.0.0.1" if one_host else
            socket.gethostbyname(socket.gethostname()))
        store = dist.TCPStore(host, 0, comm.size, True, timeout,
                              wait_for_workers=False)
        text = f"{host} {store.port}".encode()
        addr[:len(text)] = text
    comm.broadcast(addr, 0)
    if comm.rank != 0:
        host, port = addr.rstrip(b"\0").decode().split()
        store = dist.TCPStore(host, int(port), comm.size, False, timeout)
    yield store, comm.rank, comm.size


def _register_rendezvous():
    import importlib
    rdzv = importlib.import_module("torch.distributed.rendezvous")
    try:
        rdzv.register_rendezvous_handler("hcomm", _rendezvous)
    except RuntimeError:  # already registered (module reloaded)
        pass


def _done(tensors):
    fut = torch.futures.Future()
    fut.set_result(tensors)
    return torch._C._distributed_c10d._create_work_from_future(fut)


class ProcessGroupHCOMM(dist.ProcessGroup):
    """The process group of backend "hcomm": torch.distributed's calls
    (and DDP's) run on HCOMM. They complete before returning; the Work
    they return is done."""

    def __init__(self, comm):
        super().__init__(comm.rank, comm.size)
        self.comm = comm

    def getBackendName(self):
        return "hcomm"

    def name(self):
        return "hcomm"

    def allreduce(self, tensors, opts=None):
        op = _hcomm_op(opts.reduceOp) if opts is not None else Op.SUM
        for t in tensors:
            self.comm.allreduce(t, None, op)
        return _done(tensors)

    def allreduce_coalesced(self, tensors, opts=None):
        return self.allreduce(tensors, opts)

    def broadcast(self, tensors, opts):
        for t in tensors:
            self.comm.broadcast(t, opts.rootRank)
        return _done(tensors)

    def reduce(self, tensors, opts):
        for t in tensors:
            self.comm.reduce(t, None, _hcomm_op(opts.reduceOp), opts.rootRank)
        return _done(tensors)

    def allgather(self, output_lists, inputs, opts=None):
        for outs, t in zip(output_lists, inputs):
            all_gather(outs, t, self.comm)
        return _done(output_lists)

    def _allgather_base(self, output, input, opts=None):
        self.comm.allgather(input, output)
        return _done([output])

    all_gather_single = _allgather_base

    def reduce_scatter(self, outputs, input_lists, opts):
        for out, ins in zip(outputs, input_lists):
            reduce_scatter(out, ins, opts.reduceOp, self.comm)
        return _done(outputs)

    def _reduce_scatter_base(self, output, input, opts):
        self.comm.reduce_scatter(input, output, _hcomm_op(opts.reduceOp))
        return _done([output])

    reduce_scatter_single = _reduce_scatter_base

    def alltoall_base(self, output, input, output_splits, input_splits,
                      opts=None):
        if output_splits or input_splits:
            raise ValueError("hcomm: all_to_all_single takes equal splits")
        self.comm.alltoall(input, output)
        return _done([output])

    all_to_all_single = alltoall_base

    def barrier(self, opts=None):
        self.comm.barrier()
        return _done([])

    def send(self, tensors, dst, tag):
        for t in tensors:
            self.comm.send(t, dst, tag)
        return _done(tensors)

    def recv(self, tensors, src, tag):
        for t in tensors:
            self.comm.recv(t, src, tag)
        return _done(tensors)


def _create_backend(store, rank, size, timeout):
    comm = world()
    if (rank, size) != (comm.rank, comm.size):
        raise RuntimeError(
            f"hcomm backend: torch.distributed has rank {rank} of {size}, "
            f"MPI rank {comm.rank} of {comm.size}; launch with mpirun and "
            f"init_method='hcomm://' (subgroups: hcomm.Comm.split)")
    return ProcessGroupHCOMM(comm)


def _register_backend():
    kwargs = {}
    if "devices" in dist.Backend.register_backend.__code__.co_varnames:
        kwargs["devices"] = ["cpu", "cuda"]
    try:
        dist.Backend.register_backend("hcomm", _create_backend, **kwargs)
    except (RuntimeError, ValueError):  # already registered
        pass


def init_process_group(backend="hcomm", timeout=None):
    """Initialises HCOMM (and MPI) and, where torch.distributed is there,
    its default group: backend "hcomm" (collectives and DDP on HCOMM) or
    any of torch's ("gloo"), with ranks from MPI either way."""
    world()
    if dist.is_available() and not dist.is_initialized():
        kwargs = {"timeout": timeout} if timeout is not None else {}
        dist.init_process_group(backend, init_method="hcomm://", **kwargs)


def destroy_process_group():
    """Tears down torch.distributed's default group and HCOMM."""
    global _world
    if dist.is_available() and dist.is_initialized():
        dist.destroy_process_group()
    if _world is not None:
        _world.free()
        _world = None
    if _comm._state["inits"]:
        _comm.finalize()


if dist.is_available():
    _register_rendezvous()
    _register_backend()
