"""Loads libhcomm.so with ctypes and declares the calls of hcomm.h."""

import ctypes
import os

from . import _config

STATUS_NAMES = (
    "HCOMM_SUCCESS", "HCOMM_ERR_INVALID_ARG", "HCOMM_ERR_INVALID_DTYPE",
    "HCOMM_ERR_INVALID_OP", "HCOMM_ERR_INVALID_COMM", "HCOMM_ERR_OVERFLOW",
    "HCOMM_ERR_NOT_INITIALIZED", "HCOMM_ERR_NO_MEMORY",
    "HCOMM_ERR_TRANSPORT", "HCOMM_ERR_TIMEOUT", "HCOMM_ERR_UNSUPPORTED",
    "HCOMM_ERR_INTERNAL", "HCOMM_ERR_IN_PROGRESS")
IN_PROGRESS = STATUS_NAMES.index("HCOMM_ERR_IN_PROGRESS")


class HcommError(RuntimeError):
    """A failed HCOMM call: status (int), name and the library's message."""

    def __init__(self, status, message, call=""):
        self.status = status
        self.name = (STATUS_NAMES[status] if 0 <= status < len(STATUS_NAMES)
                     else f"status {status}")
        self.message = message
        super().__init__(f"{call + ': ' if call else ''}{self.name}: "
                         f"{message}")


def _candidates():
    # LIBHCOMM_PATH first (tests from a build tree), then the libdir that
    # make install recorded, then the dynamic loader's own search.
    env = os.environ.get("LIBHCOMM_PATH")
    if env:
        return [env]
    found = []
    if _config.LIBDIR:
        found.append(os.path.join(_config.LIBDIR, "libhcomm.so.0"))
    return found + ["libhcomm.so.0", "libhcomm.so"]


def _load():
    errors = []
    for path in _candidates():
        try:
            # RTLD_GLOBAL: Open MPI's plugins, loaded later by MPI_Init,
            # resolve their symbols against libmpi in the global scope.
            return ctypes.CDLL(path, mode=ctypes.RTLD_GLOBAL)
        except OSError as e:
            errors.append(str(e))
    raise ImportError("hcomm: cannot load libhcomm.so (set LIBHCOMM_PATH "
                      "to its path): " + "; ".join(errors))


lib = _load()

_P = ctypes.c_void_p
_I = ctypes.c_int
_Z = ctypes.c_size_t
_PP = ctypes.POINTER(ctypes.c_void_p)


def _proto(name, *args, res=ctypes.c_int):
    f = getattr(lib, name)
    f.argtypes = list(args)
    f.restype = res
    return f


hcomm_init = _proto("hcomm_init", _P, _P)
hcomm_finalize = _proto("hcomm_finalize")
hcomm_initialized = _proto("hcomm_initialized")
hcomm_last_error = _proto("hcomm_last_error", res=ctypes.c_char_p)
hcomm_version = _proto("hcomm_version", res=ctypes.c_char_p)
# hcomm_comm_create's argument type depends on the MPI ABI (a pointer in
# Open MPI, an int in MPICH): _comm.py sets it.
hcomm_comm_create = getattr(lib, "hcomm_comm_create")
hcomm_comm_create.restype = _I
hcomm_comm_split = _proto("hcomm_comm_split", _P, _I, _I, _PP)
hcomm_comm_dup = _proto("hcomm_comm_dup", _P, _PP)
hcomm_comm_free = _proto("hcomm_comm_free", _PP)
hcomm_comm_rank = _proto("hcomm_comm_rank", _P, ctypes.POINTER(_I))
hcomm_comm_size = _proto("hcomm_comm_size", _P, ctypes.POINTER(_I))
hcomm_wait = _proto("hcomm_wait", _PP)
hcomm_test = _proto("hcomm_test", _PP)

# Each collective's arguments after the buffers and count; the blocking,
# non-blocking (request) and stream forms share them.
_SIG = {
    "allreduce": (_P, _P, _Z, _I, _I, _P),
    "allgather": (_P, _P, _Z, _I, _P),
    "reduce_scatter": (_P, _P, _Z, _I, _I, _P),
    "broadcast": (_P, _Z, _I, _I, _P),
    "reduce": (_P, _P, _Z, _I, _I, _I, _P),
    "alltoall": (_P, _P, _Z, _I, _P),
    "gather": (_P, _P, _Z, _I, _I, _P),
    "scatter": (_P, _P, _Z, _I, _I, _P),
    "send": (_P, _Z, _I, _I, _I, _P),
    "recv": (_P, _Z, _I, _I, _I, _P),
}
calls = {}
for _name, _args in _SIG.items():
    calls[_name] = _proto("hcomm_" + _name, *_args)
    calls["i" + _name] = _proto("hcomm_i" + _name, *_args, _PP)
    calls[_name + "_stream"] = _proto("hcomm_" + _name + "_stream", *_args,
                                      _P)
calls["barrier"] = _proto("hcomm_barrier", _P)
calls["ibarrier"] = _proto("hcomm_ibarrier", _P, _PP)


def last_error():
    return hcomm_last_error().decode(errors="replace")


def check(status, call=""):
    """Raises HcommError for a status other than HCOMM_SUCCESS."""
    if status:
        raise HcommError(status, last_error(), call)
