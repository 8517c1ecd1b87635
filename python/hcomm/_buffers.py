"""The memory behind a Python object, found without copying it.

Objects are read through, in this order: a fast path for torch tensors and
NumPy arrays, __cuda_array_interface__ (CuPy, Numba, torch on CUDA), the
buffer protocol (NumPy, bytearray, array.array, memoryview) and DLPack
(__dlpack__: torch, JAX, ...). Each gives a pointer, an element count, a
data type, and where the memory lives; what must stay alive while a call
uses the memory (an export, a capsule) travels with it in Buffer.keep.
"""

import ctypes
import enum
import sys


class Dtype(enum.IntEnum):
    """hcomm_dtype_t"""
    INT8 = 0
    UINT8 = 1
    INT32 = 2
    UINT32 = 3
    INT64 = 4
    UINT64 = 5
    FLOAT16 = 6
    BFLOAT16 = 7
    FLOAT32 = 8
    FLOAT64 = 9


ITEMSIZE = (1, 1, 4, 4, 8, 8, 2, 2, 4, 8)

# (kind, bytes) as in NumPy's typestr; bool is moved as bytes.
_BY_KIND = {
    ("i", 1): Dtype.INT8, ("u", 1): Dtype.UINT8, ("b", 1): Dtype.UINT8,
    ("i", 4): Dtype.INT32, ("u", 4): Dtype.UINT32,
    ("i", 8): Dtype.INT64, ("u", 8): Dtype.UINT64,
    ("f", 2): Dtype.FLOAT16, ("f", 4): Dtype.FLOAT32, ("f", 8): Dtype.FLOAT64,
}
# NumPy's typestr for the types above (little-endian and byte types).
_NUMPY = {f"{'|' if n == 1 else '<'}{k}{n}": d for (k, n), d in
          _BY_KIND.items()}
# Buffer-protocol format characters (struct module) to typestr kinds.
_FORMAT_KIND = {"b": "i", "h": "i", "i": "i", "l": "i", "q": "i", "n": "i",
                "B": "u", "H": "u", "I": "u", "L": "u", "Q": "u", "N": "u",
                "?": "b", "c": "u", "e": "f", "f": "f", "d": "f"}
# DLPack type codes: int, uint, float, (3: opaque), bfloat, (5: complex),
# bool.
_DLPACK_KIND = {0: "i", 1: "u", 2: "f", 6: "b"}
_DL_CPU, _DL_CUDA, _DL_CUDA_HOST, _DL_CUDA_MANAGED = 1, 2, 3, 13


def as_dtype(value):
    """A Dtype from a Dtype, its value or its name ("float32")."""
    if isinstance(value, str):
        try:
            return Dtype[value.upper()]
        except KeyError:
            raise TypeError(f"unknown data type {value!r}") from None
    return Dtype(value)


class Buffer:
    """Memory to pass to HCOMM: pointer, elements, type, device."""

    __slots__ = ("ptr", "count", "dtype", "cuda", "stream", "keep")

    def __init__(self, ptr, count, dtype, cuda=False, stream=None,
                 keep=None):
        self.ptr = ptr or None  # a NULL pointer is None for ctypes
        self.count = count
        self.dtype = dtype
        self.cuda = cuda  # device, managed or pinned memory of a GPU
        # The CUDA stream to order the call on (0: the legacy default
        # stream), or None.
        self.stream = stream
        self.keep = keep

    def at(self, index):
        """The address of element index."""
        return (self.ptr or 0) + index * ITEMSIZE[self.dtype]


def _typed(ptr, nbytes, kind, itemsize, dtype, what):
    """The element type and count of nbytes at ptr."""
    if dtype is not None:
        dtype = as_dtype(dtype)
        size = ITEMSIZE[dtype]
        if nbytes % size:
            raise ValueError(f"{what}: {nbytes} bytes are not a whole "
                             f"number of {dtype.name.lower()} elements")
        return dtype, nbytes // size
    found = _BY_KIND.get((kind, itemsize))
    if found is None:
        raise TypeError(f"{what}: HCOMM has no data type for {kind}"
                        f"{itemsize} elements (pass dtype= to reinterpret "
                        f"the bytes)")
    return found, nbytes // itemsize


# --- torch (the fast path: no dictionary, no export) -----------------------

_torch_types = None


def _torch_dtypes(torch):
    global _torch_types
    if _torch_types is None:
        pairs = [("int8", Dtype.INT8), ("uint8", Dtype.UINT8),
                 ("bool", Dtype.UINT8), ("int32", Dtype.INT32),
                 ("uint32", Dtype.UINT32), ("int64", Dtype.INT64),
                 ("uint64", Dtype.UINT64), ("float16", Dtype.FLOAT16),
                 ("bfloat16", Dtype.BFLOAT16), ("float32", Dtype.FLOAT32),
                 ("float64", Dtype.FLOAT64)]
        _torch_types = {getattr(torch, n): d for n, d in pairs
                        if hasattr(torch, n)}
    return _torch_types


def _from_torch(t, torch, dtype, what, stream):
    if not t.is_contiguous():
        raise ValueError(f"{what}: the tensor is not contiguous (HCOMM "
                         f"works on the tensor's memory, without a copy)")
    if t.device.type not in ("cpu", "cuda"):
        raise ValueError(f"{what}: tensors on {t.device.type} are not "
                         f"supported (cpu or cuda)")
    cuda = t.device.type == "cuda"
    if cuda and stream is None:  # stream-ordered on the current stream
        stream = torch.cuda.current_stream(t.device).cuda_stream
    elif cuda:
        stream = stream_handle(stream)
    if dtype is None:
        found = _torch_dtypes(torch).get(t.dtype)
        if found is None:
            raise TypeError(f"{what}: HCOMM has no data type for {t.dtype}")
        return Buffer(t.data_ptr(), t.numel(), found, cuda, stream, t)
    dtype, count = _typed(0, t.numel() * t.element_size(), None, 0, dtype,
                          what)
    return Buffer(t.data_ptr(), count, dtype, cuda, stream, t)


# --- __cuda_array_interface__ and NumPy's __array_interface__ ---------------

def _contiguous(shape, strides, itemsize):
    if strides is None:
        return True
    expect = itemsize
    for n, s in zip(reversed(shape), reversed(strides)):
        if n != 1 and s != expect:
            return False
        expect *= n
    return True


def _from_interface(obj, iface, cuda, dtype, writable, what):
    shape = tuple(iface["shape"])
    typestr = iface["typestr"]
    if typestr[0] == ">" and typestr[2:] != "1":
        raise TypeError(f"{what}: big-endian data is not supported")
    kind, itemsize = typestr[1], int(typestr[2:])
    if not _contiguous(shape, iface.get("strides"), itemsize):
        raise ValueError(f"{what}: the array is not C-contiguous (HCOMM "
                         f"works on the array's memory, without a copy)")
    ptr, readonly = iface["data"]
    if writable and readonly:
        raise ValueError(f"{what}: the array is read-only")
    n = 1
    for d in shape:
        n *= d
    dtype, count = _typed(ptr, n * itemsize, kind, itemsize, dtype, what)
    # The CUDA array interface's stream: None (or the forbidden 0) when no
    # ordering is needed, else the stream that produces the data.
    stream = iface.get("stream") or None
    return Buffer(ptr, count, dtype, cuda, stream, keep=obj)


# --- the buffer protocol ----------------------------------------------------

class _PyBuffer(ctypes.Structure):
    _fields_ = [("buf", ctypes.c_void_p), ("obj", ctypes.c_void_p),
                ("len", ctypes.c_ssize_t), ("itemsize", ctypes.c_ssize_t),
                ("readonly", ctypes.c_int), ("ndim", ctypes.c_int),
                ("format", ctypes.c_char_p), ("shape", ctypes.c_void_p),
                ("strides", ctypes.c_void_p),
                ("suboffsets", ctypes.c_void_p),
                ("internal", ctypes.c_void_p)]


_api = ctypes.pythonapi
_api.PyObject_GetBuffer.argtypes = [ctypes.py_object,
                                    ctypes.POINTER(_PyBuffer), ctypes.c_int]
_api.PyBuffer_Release.argtypes = [ctypes.POINTER(_PyBuffer)]
_api.PyBuffer_Release.restype = None
_PYBUF_WRITABLE, _PYBUF_FORMAT, _PYBUF_C_CONTIGUOUS = 0x1, 0x4, 0x38


class _Export:
    """A buffer-protocol export, released when the call is done with it
    (until then a bytearray cannot be resized under HCOMM)."""

    def __init__(self, obj, writable):
        self.view = _PyBuffer()
        flags = _PYBUF_FORMAT | _PYBUF_C_CONTIGUOUS
        _api.PyObject_GetBuffer(obj, ctypes.byref(self.view),
                                flags | (_PYBUF_WRITABLE if writable else 0))

    def __del__(self):
        if self.view.obj:
            _api.PyBuffer_Release(ctypes.byref(self.view))


def _from_export(export, dtype, what):
    v = export.view
    fmt = (v.format or b"B").decode()
    if fmt[0] in "@=<>!":
        if fmt[0] in ">!" and v.itemsize > 1:
            raise TypeError(f"{what}: big-endian data is not supported")
        fmt = fmt[1:]
    kind = _FORMAT_KIND.get(fmt, "?" + fmt)
    dtype, count = _typed(v.buf, v.len, kind, v.itemsize, dtype, what)
    return Buffer(v.buf, count, dtype, keep=export)


# --- DLPack -----------------------------------------------------------------

class _DLTensor(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("device_type", ctypes.c_int32),
                ("device_id", ctypes.c_int32), ("ndim", ctypes.c_int32),
                ("code", ctypes.c_uint8), ("bits", ctypes.c_uint8),
                ("lanes", ctypes.c_uint16),
                ("shape", ctypes.POINTER(ctypes.c_int64)),
                ("strides", ctypes.POINTER(ctypes.c_int64)),
                ("byte_offset", ctypes.c_uint64)]


_api.PyCapsule_GetPointer.argtypes = [ctypes.py_object, ctypes.c_char_p]
_api.PyCapsule_GetPointer.restype = ctypes.POINTER(_DLTensor)


def _from_dlpack(obj, dtype, stream, what):
    dev_type = obj.__dlpack_device__()[0]
    cuda = dev_type in (_DL_CUDA, _DL_CUDA_HOST, _DL_CUDA_MANAGED)
    if dev_type != _DL_CPU and not cuda:
        raise ValueError(f"{what}: DLPack device type {dev_type} is not "
                         f"supported (CPU or CUDA)")
    # The producer orders its pending writes before the stream we give
    # (1: CUDA's legacy default stream, which the call then waits for).
    if dev_type == _DL_CUDA:
        stream = stream_handle(stream) or 1
        capsule = obj.__dlpack__(stream=stream)
    else:
        capsule = obj.__dlpack__()
    # The capsule keeps its name, so its destructor frees the tensor once
    # the call no longer holds it.
    t = _api.PyCapsule_GetPointer(capsule, b"dltensor").contents
    shape = [t.shape[i] for i in range(t.ndim)]
    itemsize = t.bits // 8
    strides = ([t.strides[i] * itemsize for i in range(t.ndim)]
               if t.strides else None)
    if not _contiguous(shape, strides, itemsize):
        raise ValueError(f"{what}: the tensor is not contiguous (HCOMM works "
                         f"on the tensor's memory, without a copy)")
    kind = _DLPACK_KIND.get(t.code, "?")
    if t.code == 4 and t.bits == 16:
        kind, dtype = "f", dtype or Dtype.BFLOAT16
    if t.lanes != 1:
        raise TypeError(f"{what}: vector types (lanes {t.lanes}) are not "
                        f"supported")
    n = 1
    for d in shape:
        n *= d
    ptr = (t.data or 0) + t.byte_offset
    dtype, count = _typed(ptr, n * itemsize, kind, itemsize, dtype, what)
    return Buffer(ptr, count, dtype, cuda, stream, keep=(obj, capsule))


def stream_handle(stream):
    """A cudaStream_t from an int or a torch / CuPy / CUDA Python stream."""
    if stream is None or isinstance(stream, int):
        return stream
    for attr in ("cuda_stream", "ptr", "handle"):
        if hasattr(stream, attr):
            return int(getattr(stream, attr))
    if hasattr(stream, "__cuda_stream__"):
        return int(stream.__cuda_stream__()[1])
    raise TypeError(f"stream: cannot read a CUDA stream from "
                    f"{type(stream).__name__}")


# --- the entry point --------------------------------------------------------

def get(obj, dtype=None, writable=False, what="buffer", stream=None):
    """A Buffer for obj. Raises TypeError for objects that expose no memory
    or a type HCOMM lacks, ValueError for memory it cannot use as it is."""
    torch = sys.modules.get("torch")
    if torch is not None and isinstance(obj, torch.Tensor):
        return _from_torch(obj, torch, dtype, what, stream)
    iface = getattr(obj, "__cuda_array_interface__", None)
    if iface is not None:
        return _from_interface(obj, iface, True, dtype, writable, what)
    np = sys.modules.get("numpy")
    if np is not None and type(obj) is np.ndarray:
        iface = obj.__array_interface__
        found = _NUMPY.get(iface["typestr"])
        # NumPy gives strides only for arrays that are not C-contiguous.
        if found is None or dtype is not None or iface["strides"]:
            return _from_interface(obj, iface, False, dtype, writable, what)
        ptr, readonly = iface["data"]
        if writable and readonly:
            raise ValueError(f"{what}: the array is read-only")
        return Buffer(ptr, obj.size, found, keep=obj)
    try:
        export = _Export(obj, writable)
    except BufferError as e:
        raise ValueError(f"{what}: {e} (HCOMM works on the object's "
                         f"memory, without a copy)") from None
    except TypeError:  # no buffer protocol
        if hasattr(obj, "__dlpack__"):
            return _from_dlpack(obj, dtype, stream, what)
        raise TypeError(f"{what}: a {type(obj).__name__} exposes no memory "
                        f"(the buffer protocol, __cuda_array_interface__ or "
                        f"__dlpack__)") from None
    return _from_export(export, dtype, what)
