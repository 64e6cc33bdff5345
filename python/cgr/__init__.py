"""cgr: a CUDA-graph inference engine for multi-branch CNNs with early exits, from Python.

    import cgr
    engine = cgr.compile(model, torch.randn(1, 3, 32, 32))   # torch.onnx.export, then build
    result = engine(x)                                        # NumPy or torch in, same kind out
    result["output"], result.answered_by, result.exits

Engine.from_onnx(path, ...) builds from an ONNX file; BucketedEngine.from_onnx(path,
buckets=[1, 2, 4, 8], ...) one engine per batch size (a batch runs on the smallest bucket
that holds it); benchmark(...) times executor modes side by side as cgr-bench does. Every engine error is a cgr.Error (a RuntimeError) with the C++
message, which names the file, tensor or option involved.
"""

from ._cgr import Error

Error.__module__ = "cgr"  # shown as cgr.Error in tracebacks
from ._engine import Context, Engine, ExitReport, Result, TensorSpec
from ._buckets import BucketedContext, BucketedEngine
from ._compile import compile
from ._benchmark import ModeBenchmark, Stats, benchmark
from ._cgr import cuda_unavailable_reason

__version__ = "0.1.0"

__all__ = [
    "Engine",
    "Context",
    "BucketedEngine",
    "BucketedContext",
    "Result",
    "ExitReport",
    "TensorSpec",
    "Error",
    "compile",
    "benchmark",
    "ModeBenchmark",
    "Stats",
    "cuda_unavailable_reason",
]
