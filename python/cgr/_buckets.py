"""BucketedEngine and BucketedContext: the Python face of cgr::BucketedEngine (batch buckets).

One engine per batch size of a list (e.g. 1, 2, 4, 8), built from an ONNX model whose inputs
lead with a symbolic batch. A batch of n runs on the smallest bucket that holds it, padded with
copies of its last sample (an exit fires only when every sample is confident, and copies leave
that decision unchanged); outputs and exit reports hold the n real rows only. This is what a
dynamic batcher (Triton's, serving/triton) needs: any batch up to the largest bucket replays an
engine built ahead of time.

Arrays go in and come out as with Engine (NumPy arrays or CPU torch tensors, float32); inputs
and outputs are described per sample, without the batch dim.
"""

from __future__ import annotations

import os
import threading
from typing import Any, Iterable, List, Mapping, Optional, Sequence, Tuple, Union

from . import _cgr
from ._cgr import Error
from ._engine import Result, TensorSpec, _ContextBase, _EngineBase, _build_arguments

__all__ = ["BucketedEngine", "BucketedContext"]


class BucketedContext(_ContextBase):
    """One context per bucket (each with its own buffers), one inference at a time: use one
    per thread (a second thread is refused with cgr.Error). The GIL is released while it
    infers."""

    @property
    def last_bucket(self) -> int:
        """The bucket the last inference ran on (0 before the first)."""
        return self._native.last_bucket()

    def infer(self, inputs: Mapping[str, Any]) -> Result:
        """Runs one batch, {input name: n x (per-sample shape)}, n from 1 to max_batch."""
        prepared, torch_in, cuda_names = self._prepared(inputs)
        if cuda_names:
            raise Error(
                f"input {cuda_names[0]!r} is a CUDA tensor: a BucketedEngine takes host arrays and "
                "copies them to its device (pass x.cpu())"
            )
        return self._infer_on_host(prepared, torch_in)


class BucketedEngine(_EngineBase):
    """Engines for a list of batch sizes (cgr::BucketedEngine), immutable after build. Calling
    it runs on a context of the calling thread (created on first use); create_context() gives
    one explicitly."""

    def __init__(self, native, path: str):
        # Use BucketedEngine.from_onnx.
        self._native = native
        self._path = path
        self._contexts = threading.local()
        self._buckets = [int(b) for b in native.buckets]
        self._inputs = [TensorSpec(n, tuple(s)) for n, s in native.inputs]
        self._outputs = [TensorSpec(n, tuple(s)) for n, s in native.outputs]
        self._options = native.options()

    @classmethod
    def from_onnx(
        cls,
        path: Union[str, os.PathLike],
        buckets: Sequence[int] = (1, 2, 4, 8),
        device: str = "cpu",
        mode: str = "dag",
        exits: str = "all",
        threshold: float = 0.9,
        threads: int = 0,
        input_shapes: Optional[Mapping[str, Sequence[int]]] = None,
        exit_outputs: Optional[Iterable[Union[str, Tuple[str, str]]]] = None,
        precision: str = "fp32",
        max_folded_elements: Optional[int] = None,
        conv_algorithms: str = "heuristic",
    ) -> "BucketedEngine":
        """Imports an ONNX model once per bucket and builds an engine for each.

        buckets: the batch sizes (distinct, at least 1; sorted here). Every graph input's
        leading dim becomes the bucket; its other dims come from the file or input_shapes
        (any batch there). The other arguments are Engine.from_onnx's.
        """
        if isinstance(path, (bytes, bytearray)):
            raise TypeError("BucketedEngine.from_onnx takes a path to an ONNX file, not bytes")
        try:
            sizes = [int(b) for b in buckets]
        except (TypeError, ValueError):
            raise TypeError(f"buckets: a sequence of batch sizes, got {buckets!r}") from None
        arguments = _build_arguments(device, mode, exits, threshold, threads, input_shapes,
                                     exit_outputs, precision, max_folded_elements,
                                     conv_algorithms)
        path = os.fspath(path)
        return cls(_cgr.BucketedEngine.from_file(path, sizes, arguments), path)

    # --- what the engine is -------------------------------------------------------------
    @property
    def buckets(self) -> List[int]:
        return list(self._buckets)

    @property
    def max_batch(self) -> int:
        return self._buckets[-1]

    def bucket_for(self, batch: int) -> int:
        """The smallest bucket that holds `batch` (cgr.Error when none does)."""
        return int(self._native.bucket_for(int(batch)))

    # inputs, outputs, exit_names, device, mode, exit_policy, threshold, threads, precision,
    # conv_algorithms: _EngineBase's
    # (inputs and outputs per sample, without the batch dim).

    def _input_list(self) -> str:
        return ", ".join(
            f"'{s.name}' n x {'x'.join(map(str, s.shape)) or 'scalar'}" for s in self._inputs
        )

    def __repr__(self) -> str:
        return (
            f"cgr.BucketedEngine({self._path!r}, buckets={self._buckets}, device={self.device!r}, "
            f"mode={self.mode!r}, exits={self.exit_policy!r}, inputs=[{self._input_list()}], "
            f"outputs={[s.name for s in self._outputs]})"
        )

    # --- running it ------------------------------------------------------------------------
    def create_context(self) -> BucketedContext:
        return BucketedContext(self, self._native.create_context())
