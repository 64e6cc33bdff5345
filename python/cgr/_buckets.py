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
from typing import Any, Dict, Iterable, List, Mapping, Optional, Sequence, Tuple, Union

from . import _cgr
from ._cgr import Error
from ._engine import Result, TensorSpec, _build_arguments, _prepare, _torch_module

__all__ = ["BucketedEngine", "BucketedContext"]


class BucketedContext:
    """One context per bucket (each with its own buffers), one inference at a time: use one
    per thread (a second thread is refused with cgr.Error). The GIL is released while it
    infers."""

    def __init__(self, engine: "BucketedEngine", native):
        self._engine = engine
        self._native = native

    @property
    def engine(self) -> "BucketedEngine":
        return self._engine

    @property
    def last_bucket(self) -> int:
        """The bucket the last inference ran on (0 before the first)."""
        return self._native.last_bucket()

    def __call__(self, *args, **named) -> Result:
        """ctx(x) binds x to the engine's only input; ctx(name=x, ...) binds by name."""
        if args:
            if len(args) > 1 or named:
                raise TypeError(
                    "pass one array positionally (an engine with one input) or every input by "
                    f"name (inputs: {self._engine._input_list()})"
                )
            if len(self._engine.inputs) != 1:
                raise Error(
                    f"this engine has {len(self._engine.inputs)} inputs "
                    f"({self._engine._input_list()}): pass them by name, "
                    "ctx(name=array, ...) or ctx.infer({name: array, ...})"
                )
            return self.infer({self._engine.inputs[0].name: args[0]})
        return self.infer(named)

    def infer(self, inputs: Mapping[str, Any]) -> Result:
        """Runs one batch, {input name: n x (per-sample shape)}, n from 1 to max_batch."""
        if not isinstance(inputs, Mapping):
            raise TypeError(
                f"infer() takes a mapping of input names to arrays, got {type(inputs).__name__}"
            )
        prepared = []
        torch_in = False
        for name, value in inputs.items():
            if not isinstance(name, str):
                raise TypeError(f"input names are strings, got {name!r}")
            array, is_torch, is_cuda = _prepare(name, value)
            if is_cuda:
                raise Error(
                    f"input {name!r} is a CUDA tensor: a BucketedEngine takes host arrays and "
                    "copies them to its device (pass x.cpu())"
                )
            prepared.append((name, array))
            torch_in = torch_in or is_torch
        outputs, answered_by, exits, non_finite = self._native.infer(prepared)
        if torch_in:
            torch = _torch_module()
            outputs = {name: torch.from_numpy(array) for name, array in outputs.items()}
        return Result(outputs, answered_by, exits, non_finite)


class BucketedEngine:
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
                                     exit_outputs)
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

    @property
    def inputs(self) -> List[TensorSpec]:
        """Per sample: the shapes without the batch dim."""
        return list(self._inputs)

    @property
    def outputs(self) -> List[TensorSpec]:
        """Per sample: the network's outputs and, unless exits are off, each exit head's."""
        return list(self._outputs)

    @property
    def exit_names(self) -> List[str]:
        """The exit heads this engine reports, in backbone order (empty when exits are off)."""
        return list(self._native.exit_names)

    @property
    def device(self) -> str:
        return self._options["device"]

    @property
    def mode(self) -> str:
        return self._options["mode"]

    @property
    def exit_policy(self) -> str:
        return self._options["exits"]

    @property
    def threshold(self) -> float:
        return self._options["threshold"]

    @property
    def threads(self) -> int:
        return self._options["threads"]

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

    def _thread_context(self) -> BucketedContext:
        context = getattr(self._contexts, "context", None)
        if context is None:
            context = self.create_context()
            self._contexts.context = context
        return context

    def __call__(self, *args, **named) -> Result:
        """engine(x) / engine(name=x, ...): one batch on this thread's context."""
        return self._thread_context()(*args, **named)

    def infer(self, inputs: Mapping[str, Any]) -> Result:
        return self._thread_context().infer(inputs)
