"""Every engine error is a cgr.Error (a RuntimeError) carrying the C++ message, which names the
file, input or option; a failed call leaves the engine usable."""

import ctypes

import numpy as np
import pytest
import torch

import cgr


def test_error_is_a_runtime_error():
    assert issubclass(cgr.Error, RuntimeError)
    assert cgr.Error.__module__ == "cgr"


def test_bad_model_files(tmp_path):
    missing = tmp_path / "missing.onnx"
    with pytest.raises(cgr.Error, match=rf"^{missing}: cannot open \(No such file or directory\)$"):
        cgr.Engine.from_onnx(missing)
    garbage = tmp_path / "garbage.onnx"
    garbage.write_bytes(b"this is not a protobuf")
    with pytest.raises(cgr.Error, match=rf"^{garbage}: not a valid ONNX model"):
        cgr.Engine.from_onnx(garbage)
    with pytest.raises(cgr.Error, match=r"^ONNX model bytes: not a valid ONNX model"):
        cgr.Engine.from_onnx(b"\x08\x07garbage")


def test_bad_options(two_branch_onnx):
    cases = [
        (dict(device="tpu"), r"unknown device 'tpu' \(expected cpu or cuda\)"),
        (dict(mode="fast"), r"unknown mode 'fast' \(expected dag, eager or stream-graph\)"),
        (dict(exits="some"), r"unknown exit policy 'some' \(expected off, all or early\)"),
        (dict(threshold=1.5), r"the exit threshold 1.5 is not in \[0, 1\]"),
        (dict(input_shapes={"image": [1, 3, 16]}), r"input 'image' has rank 4 but the given shape"),
    ]
    for options, message in cases:
        with pytest.raises(cgr.Error, match=message):
            cgr.Engine.from_onnx(two_branch_onnx, **options)
    if cgr.cuda_unavailable_reason():
        with pytest.raises(cgr.Error, match=r"no CUDA device"):
            cgr.Engine.from_onnx(two_branch_onnx, device="cuda")


def test_wrong_inputs_name_the_input(two_branch_engine, image):
    engine = two_branch_engine
    cases = [
        (np.zeros((1, 3, 8, 8), np.float32), r"^input 'image' has shape 1x3x8x8, expected 1x3x16x16$"),
        (np.zeros((3, 16, 16), np.float32), r"^input 'image' has shape 3x16x16, expected 1x3x16x16$"),
        (np.zeros((1, 3, 16, 16)), r"^input 'image' has dtype float64; cgr engines take float32"),
        (torch.zeros(1, 3, 16, 16, dtype=torch.float16), r"^input 'image' has dtype float16;"),
        (torch.zeros(1, 3, 16, 16, dtype=torch.int64), r"^input 'image' has dtype int64;"),
        (np.zeros((1, 3, 16, 16), bool), r"^input 'image' has dtype bool;"),
    ]
    for value, message in cases:
        with pytest.raises(cgr.Error, match=message):
            engine(value)
    with pytest.raises(cgr.Error, match=r"^no input named 'x' \(inputs: 'image' 1x3x16x16\)$"):
        engine.infer({"x": image})
    with pytest.raises(cgr.Error, match=r"^input 'image' \(1x3x16x16\) is missing$"):
        engine.infer({})
    with pytest.raises(TypeError, match=r"input 'image': expected a numpy.ndarray or a torch.Tensor"):
        engine([[1.0, 2.0]])
    # The engine and its thread's context still work.
    assert engine(image)["output"].shape == (1, 10)


class DLDevice(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32)]


class DLDataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class DLTensor(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("device", DLDevice), ("ndim", ctypes.c_int32),
                ("dtype", DLDataType), ("shape", ctypes.POINTER(ctypes.c_int64)),
                ("strides", ctypes.POINTER(ctypes.c_int64)), ("byte_offset", ctypes.c_uint64)]


DELETER = ctypes.CFUNCTYPE(None, ctypes.c_void_p)


class DLManagedTensor(ctypes.Structure):
    _fields_ = [("dl_tensor", DLTensor), ("manager_ctx", ctypes.c_void_p), ("deleter", DELETER)]


class FakeCudaArray:
    """A DLPack producer that says its float32 data lives on cuda:0 (what a CUDA tensor says;
    this machine has no GPU to make a real one). The engine must refuse it before reading."""

    def __init__(self, shape):
        self._host = np.zeros(shape, np.float32)  # never read: the engine refuses first
        self._shape = (ctypes.c_int64 * len(shape))(*shape)
        self._deleter = DELETER(lambda _: None)
        self._managed = DLManagedTensor()
        t = self._managed.dl_tensor
        t.data = self._host.ctypes.data
        t.device = DLDevice(2, 0)  # kDLCUDA, device 0
        t.ndim = len(shape)
        t.dtype = DLDataType(2, 32, 1)  # float32
        t.shape = self._shape
        t.strides = None
        self._managed.deleter = self._deleter

    def __dlpack_device__(self):
        return (2, 0)

    def __dlpack__(self, stream=None):
        new_capsule = ctypes.pythonapi.PyCapsule_New
        new_capsule.restype = ctypes.py_object
        new_capsule.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p]
        return new_capsule(ctypes.addressof(self._managed), b"dltensor", None)


def test_cuda_array_on_a_cpu_engine_is_refused(two_branch_engine, image):
    with pytest.raises(cgr.Error, match=r"^input 'image' is on cuda:0, but this engine runs on "
                                        r"the cpu: move it there \(x.cpu\(\)\) or build the "
                                        r"engine with device='cuda'$"):
        two_branch_engine(FakeCudaArray((1, 3, 16, 16)))
    assert two_branch_engine(image)["output"].shape == (1, 10)
