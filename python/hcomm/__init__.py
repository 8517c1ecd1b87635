"""HCOMM from Python: collectives on NumPy, CuPy and torch memory.

    import numpy as np, hcomm
    comm = hcomm.Comm.world()                 # initialises HCOMM and MPI
    x = np.arange(4, dtype=np.float32)
    comm.allreduce(x, op=hcomm.SUM)           # in place, on x's memory
    req = comm.iallgather(x, np.empty(4 * comm.size, np.float32))
    y = req.wait()

Launch with mpirun -np N python3 prog.py. Failed calls raise HcommError
with the library's message (hcomm_last_error); buffers HCOMM cannot use
as they are raise TypeError or ValueError before anything is sent.
"""

from ._buffers import Dtype
from ._comm import (IN_PLACE, Comm, Op, Request, finalize, init, initialized,
                    version, waitall)
from ._lib import HcommError

INT8, UINT8, INT32, UINT32, INT64, UINT64 = (
    Dtype.INT8, Dtype.UINT8, Dtype.INT32, Dtype.UINT32, Dtype.INT64,
    Dtype.UINT64)
FLOAT16, BFLOAT16, FLOAT32, FLOAT64 = (
    Dtype.FLOAT16, Dtype.BFLOAT16, Dtype.FLOAT32, Dtype.FLOAT64)
SUM, PROD, MAX, MIN, AVG = Op.SUM, Op.PROD, Op.MAX, Op.MIN, Op.AVG

__all__ = ["init", "finalize", "initialized", "version", "Comm", "Request",
           "waitall", "HcommError", "IN_PLACE", "Dtype", "Op",
           "INT8", "UINT8", "INT32", "UINT32", "INT64", "UINT64", "FLOAT16",
           "BFLOAT16", "FLOAT32", "FLOAT64", "SUM", "PROD", "MAX", "MIN",
           "AVG"]
