"""numpy <-> rgml through DLPack (run by tests/numpy.rs): python3 numpy_dlpack.py LIBRGML_CAPI.so

Both ABIs: the legacy "dltensor" capsule (DLPack 0.8) and "dltensor_versioned" (1.0).
rgml -> numpy: rgml's demo exports, wrapped in capsules, go through
numpy.from_dlpack; values, dtype, shape, byte strides and the data address
(zero copy) are checked. numpy -> rgml: numpy's own capsules are imported by
rgml, read back by a CPU run and compared; refused ones stay numpy's. And a
full round trip numpy -> rgml -> numpy keeps bytes, strides and the address.
No managed tensor may leak: rgml's live export count ends at zero.
"""

import ctypes
import gc
import sys

import numpy as np


class DLDevice(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32)]


class DLDataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class DLTensor(ctypes.Structure):
    _fields_ = [
        ("data", ctypes.c_void_p),
        ("device", DLDevice),
        ("ndim", ctypes.c_int32),
        ("dtype", DLDataType),
        ("shape", ctypes.POINTER(ctypes.c_int64)),
        ("strides", ctypes.POINTER(ctypes.c_int64)),
        ("byte_offset", ctypes.c_uint64),
    ]


class DLManagedTensor(ctypes.Structure):
    _fields_ = [("dl_tensor", DLTensor), ("manager_ctx", ctypes.c_void_p), ("deleter", ctypes.c_void_p)]


class DLPackVersion(ctypes.Structure):
    _fields_ = [("major", ctypes.c_uint32), ("minor", ctypes.c_uint32)]


class DLManagedTensorVersioned(ctypes.Structure):
    _fields_ = [("version", DLPackVersion), ("manager_ctx", ctypes.c_void_p), ("deleter", ctypes.c_void_p),
                ("flags", ctypes.c_uint64), ("dl_tensor", DLTensor)]


READ_ONLY = 1


class ImportReport(ctypes.Structure):
    _fields_ = [
        ("ne", ctypes.c_int64 * 4),
        ("nb", ctypes.c_uint64 * 4),
        ("offset", ctypes.c_uint64),
        ("first", ctypes.c_size_t),
        ("ggml_type", ctypes.c_uint32),
    ]


lib = ctypes.CDLL(sys.argv[1])
lib.rgml_dlpack_demo_export.restype = ctypes.c_void_p
lib.rgml_dlpack_demo_export.argtypes = [ctypes.c_int32]
lib.rgml_dlpack_free.argtypes = [ctypes.c_void_p]
lib.rgml_dlpack_live_exports.restype = ctypes.c_size_t
lib.rgml_last_error.restype = ctypes.c_size_t
lib.rgml_last_error.argtypes = [ctypes.c_char_p, ctypes.c_size_t]
lib.rgml_dlpack_import_check.restype = ctypes.c_int64
lib.rgml_dlpack_import_check.argtypes = [
    ctypes.c_void_p, ctypes.POINTER(ImportReport), ctypes.POINTER(ctypes.c_double), ctypes.c_size_t]
lib.rgml_dlpack_reexport.restype = ctypes.c_void_p
lib.rgml_dlpack_reexport.argtypes = [ctypes.c_void_p]
# the versioned ABI (DLPack 1.0, "dltensor_versioned")
lib.rgml_dlpack_demo_export_versioned.restype = ctypes.c_void_p
lib.rgml_dlpack_demo_export_versioned.argtypes = [ctypes.c_int32]
lib.rgml_dlpack_free_versioned.argtypes = [ctypes.c_void_p]
lib.rgml_dlpack_import_check_versioned.restype = ctypes.c_int64
lib.rgml_dlpack_import_check_versioned.argtypes = lib.rgml_dlpack_import_check.argtypes
lib.rgml_dlpack_reexport_versioned.restype = ctypes.c_void_p
lib.rgml_dlpack_reexport_versioned.argtypes = [ctypes.c_void_p]

api = ctypes.pythonapi
api.PyCapsule_New.restype = ctypes.py_object
api.PyCapsule_New.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p]
api.PyCapsule_GetPointer.restype = ctypes.c_void_p
api.PyCapsule_GetPointer.argtypes = [ctypes.py_object, ctypes.c_char_p]
api.PyCapsule_SetName.restype = ctypes.c_int
api.PyCapsule_SetName.argtypes = [ctypes.py_object, ctypes.c_char_p]
api.PyCapsule_IsValid.restype = ctypes.c_int
api.PyCapsule_IsValid.argtypes = [ctypes.py_object, ctypes.c_char_p]
# the destructor gets the dying capsule as a raw pointer: no new reference to it
raw_is_valid = ctypes.PYFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.c_char_p)(("PyCapsule_IsValid", api))
raw_get_pointer = ctypes.PYFUNCTYPE(ctypes.c_void_p, ctypes.c_void_p, ctypes.c_char_p)(("PyCapsule_GetPointer", api))

# capsules keep a pointer to their name: these buffers live as long as the module
DLTENSOR = ctypes.create_string_buffer(b"dltensor")
USED = ctypes.create_string_buffer(b"used_dltensor")
DLTENSOR_V = ctypes.create_string_buffer(b"dltensor_versioned")
USED_V = ctypes.create_string_buffer(b"used_dltensor_versioned")
# per ABI: (capsule name, spent name, rgml's import check, rgml's re-export)
ABI = {
    False: (DLTENSOR, USED, lib.rgml_dlpack_import_check, lib.rgml_dlpack_reexport),
    True: (DLTENSOR_V, USED_V, lib.rgml_dlpack_import_check_versioned, lib.rgml_dlpack_reexport_versioned),
}


@ctypes.CFUNCTYPE(None, ctypes.c_void_p)
def capsule_destructor(capsule):
    # a capsule nobody consumed still owns its tensor: release it
    if raw_is_valid(capsule, DLTENSOR):
        lib.rgml_dlpack_free(raw_get_pointer(capsule, DLTENSOR))
    elif raw_is_valid(capsule, DLTENSOR_V):
        lib.rgml_dlpack_free_versioned(raw_get_pointer(capsule, DLTENSOR_V))


def last_error():
    buf = ctypes.create_string_buffer(1024)
    lib.rgml_last_error(buf, len(buf))
    return buf.value.decode()


class RgmlTensor:
    """A managed tensor rgml exported, offered to numpy by the DLPack protocol."""

    def __init__(self, ptr, versioned=False):
        assert ptr, last_error()
        self.ptr = ptr
        self.versioned = versioned
        self.calls = []

    def __dlpack__(self, *, stream=None, max_version=None, dl_device=None, copy=None):
        # numpy 2 asks with max_version=(1, x): a legacy capsule is still a valid answer
        self.calls.append(dict(stream=stream, max_version=max_version, dl_device=dl_device, copy=copy))
        if dl_device is not None and tuple(dl_device) != (1, 0):
            raise BufferError(f"rgml exports CPU tensors, not {dl_device}")
        if copy:
            raise BufferError("rgml exports share memory (copy=True refused)")
        if self.ptr is None:
            raise BufferError("already exported")
        if self.versioned and (max_version is None or max_version[0] < 1):
            raise BufferError(f"this tensor is versioned (DLPack 1.0), max_version is {max_version}")
        ptr, self.ptr = self.ptr, None
        name = DLTENSOR_V if self.versioned else DLTENSOR
        return api.PyCapsule_New(ptr, name, ctypes.cast(capsule_destructor, ctypes.c_void_p))

    def __dlpack_device__(self):
        return (1, 0)  # kDLCPU, device 0


def header(ptr, versioned):
    if versioned:
        v = DLManagedTensorVersioned.from_address(ptr)
        assert (v.version.major, v.version.minor) == (1, 0) and v.flags & READ_ONLY, (v.version, v.flags)
        t = v.dl_tensor
    else:
        t = DLManagedTensor.from_address(ptr).dl_tensor
    shape = tuple(t.shape[i] for i in range(t.ndim))
    strides = tuple(t.strides[i] for i in range(t.ndim))
    return t, shape, strides


def rgml_to_numpy(versioned):
    m = np.arange(12, dtype=np.float32).reshape(3, 4)
    i3 = (np.arange(24, dtype=np.int32) * 3 - 7).reshape(2, 3, 4)
    cases = {
        0: m,
        1: m.T,
        2: m[1:3, 1:3],
        3: (np.arange(6) / 2).astype(np.float16).reshape(2, 3),
        4: i3,
        5: i3.transpose(2, 1, 0),
        6: (m + np.array([100, 200, 300, 400], dtype=np.float32)).T,
    }
    offsets = {2: 20}
    for kind, want in cases.items():
        ptr = (lib.rgml_dlpack_demo_export_versioned if versioned else lib.rgml_dlpack_demo_export)(kind)
        assert ptr, last_error()
        t, shape, strides = header(ptr, versioned)
        data, offset = t.data, t.byte_offset
        assert shape == want.shape, (kind, shape, want.shape)
        assert tuple(s * want.itemsize for s in strides) == want.strides, (kind, strides, want.strides)
        assert offset == offsets.get(kind, 0), (kind, offset)
        src = RgmlTensor(ptr, versioned)
        a = np.from_dlpack(src)
        if versioned:
            assert not a.flags.writeable, "numpy honours the versioned read-only flag"
        assert len(src.calls) >= 1, "numpy went through __dlpack__"
        assert a.dtype == want.dtype, (kind, a.dtype, want.dtype)
        assert a.shape == want.shape and a.strides == want.strides, (kind, a.shape, a.strides, want.strides)
        assert np.array_equal(a, want), (kind, a, want)
        assert a.__array_interface__["data"][0] == data + offset, "zero copy: numpy reads rgml's bytes"
        print(f"rgml -> numpy{' (versioned)' if versioned else ''} kind {kind}: {a.dtype} shape {a.shape} strides {a.strides} ok (via {src.calls[-1]})")
        del a, src
    gc.collect()
    assert not lib.rgml_dlpack_demo_export(7) and not lib.rgml_dlpack_demo_export_versioned(7)
    assert "not whole elements" in last_error(), last_error()
    # an unconsumed capsule releases its tensor in its destructor
    ptr = (lib.rgml_dlpack_demo_export_versioned if versioned else lib.rgml_dlpack_demo_export)(0)
    cap = RgmlTensor(ptr, versioned).__dlpack__(max_version=(1, 0))
    assert lib.rgml_dlpack_live_exports() == 1
    del cap
    gc.collect()
    assert lib.rgml_dlpack_live_exports() == 0, lib.rgml_dlpack_live_exports()


def numpy_to_rgml(versioned):
    name, used, import_check, _ = ABI[versioned]
    kw = dict(max_version=(1, 0)) if versioned else {}
    base = np.arange(60, dtype=np.float64).reshape(3, 4, 5)
    cases = [
        base,
        base.astype(np.float32)[1:, ::2, 1:4],
        base.astype(np.float32).transpose(2, 0, 1),
        np.asfortranarray(base.astype(np.float16)[0]),
        (base.astype(np.int64) - 30)[2],
        base.astype(np.int32)[:, 1],
        base.astype(np.int16)[0, 0],
        base.astype(np.int8)[:2, :2, :2],
        np.array(3.5, dtype=np.float32),
        np.zeros((0, 3), dtype=np.float32),
    ]
    if versioned:
        # numpy exports read-only arrays only under the versioned ABI: a stride-0 broadcast
        cases.append(np.broadcast_to(np.arange(3, dtype=np.float32), (4, 3)))
    for arr in cases:
        cap = arr.__dlpack__(**kw)
        ptr = api.PyCapsule_GetPointer(cap, name)
        rep = ImportReport()
        out = (ctypes.c_double * max(arr.size, 1))()
        n = import_check(ptr, ctypes.byref(rep), out, arr.size)
        assert n >= 0 or n == -2, last_error()
        # rgml took ownership (its deleter already ran): the capsule is spent
        assert api.PyCapsule_SetName(cap, used) == 0
        assert n == arr.size, (n, last_error())
        ne = list(reversed(arr.shape)) + [1] * (4 - arr.ndim)
        assert list(rep.ne) == ne, (list(rep.ne), arr.shape)
        for d in range(arr.ndim):
            if arr.shape[d] > 1:
                assert rep.nb[arr.ndim - 1 - d] == arr.strides[d], (list(rep.nb), arr.strides)
        if arr.size:
            assert rep.first == arr.__array_interface__["data"][0], "zero copy: rgml reads numpy's bytes"
        got = np.frombuffer(out, dtype=np.float64, count=arr.size)
        assert np.array_equal(got, arr.astype(np.float64).reshape(-1)), (got, arr)
        print(f"numpy -> rgml{' (versioned)' if versioned else ''} {arr.dtype} shape {arr.shape} strides {arr.strides}: ne {ne} nb {list(rep.nb)} ok")
        del cap
    # refused: negative strides, unsigned types; the capsule stays numpy's and frees itself
    for arr, why in [(base[::-1], "negative stride"), (base.astype(np.uint8), "no rgml type"),
                     (np.zeros((2, 2, 2, 2, 2), dtype=np.float32), "at most 4 dims")]:
        cap = arr.__dlpack__(**kw)
        ptr = api.PyCapsule_GetPointer(cap, name)
        assert import_check(ptr, None, None, 0) == -1
        assert why in last_error(), last_error()
        assert api.PyCapsule_IsValid(cap, name), "a refused capsule is not consumed"
        print(f"numpy -> rgml {arr.dtype} strides {arr.strides}: refused ({last_error()})")
        del cap


def round_trip(versioned):
    name, used, _, reexport = ABI[versioned]
    kw = dict(max_version=(1, 0)) if versioned else {}
    # numpy -> rgml -> numpy: the same bytes at the same address, with the same strides
    base = np.arange(120, dtype=np.float32).reshape(4, 5, 6)
    for arr in [base, base[1:, ::2, 2:5], base.transpose(1, 2, 0), base.astype(np.int32)[2], base[3, 4]]:
        cap = arr.__dlpack__(**kw)
        ptr = reexport(api.PyCapsule_GetPointer(cap, name))
        assert ptr, last_error()
        assert api.PyCapsule_SetName(cap, used) == 0
        del cap
        back = np.from_dlpack(RgmlTensor(ptr, versioned))
        if versioned:
            assert not back.flags.writeable, "numpy honours the versioned read-only flag"
        assert back.dtype == arr.dtype and back.shape == arr.shape, (back.dtype, back.shape, arr.shape)
        assert back.strides == arr.strides, (back.strides, arr.strides)
        assert back.__array_interface__["data"][0] == arr.__array_interface__["data"][0]
        assert back.tobytes() == arr.tobytes()
        print(f"numpy -> rgml -> numpy{' (versioned)' if versioned else ''} {arr.dtype} shape {arr.shape} strides {arr.strides}: same bytes, strides, address")
        del back
    gc.collect()


for versioned in (False, True):
    rgml_to_numpy(versioned)
    numpy_to_rgml(versioned)
    round_trip(versioned)
gc.collect()
assert lib.rgml_dlpack_live_exports() == 0, f"{lib.rgml_dlpack_live_exports()} rgml exports leaked"
print(f"numpy {np.__version__}: DLPack round trips OK")
