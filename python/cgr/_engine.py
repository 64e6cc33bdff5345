"""Engine, Context and Result: the Python face of cgr::Engine and cgr::ExecutionContext.

Arrays go in as NumPy arrays or torch tensors (float32; a non-contiguous one is made
contiguous, any other dtype is refused by name) and results come back as the same kind. CPU
data is handed to the engine without a copy, through the buffer protocol or DLPack; results
are NumPy arrays that own the engine's output tensors (torch.from_numpy views of them for torch
callers). CUDA tensors on a CUDA engine take the device-resident path: copies into the
context's device buffers, a graph launch and copies out, all on torch's current stream.
"""

from __future__ import annotations

import os
import sys
import threading
from typing import Any, Dict, Iterable, Iterator, List, Mapping, NamedTuple, Optional, Sequence, Tuple, Union

import numpy as np

from . import _cgr
from ._cgr import Error

__all__ = ["Engine", "Context", "Result", "TensorSpec", "ExitReport"]

ExitReport = _cgr.ExitReport

_DLPACK_CUDA = 2  # DLDeviceType kDLCUDA


class TensorSpec(NamedTuple):
    """A declared input or output of an engine."""

    name: str
    shape: Tuple[int, ...]


def _torch_module():
    """torch when the caller has imported it (a torch tensor can only come from there)."""
    return sys.modules.get("torch")


def _is_torch_tensor(value: Any) -> bool:
    torch = _torch_module()
    return torch is not None and isinstance(value, torch.Tensor)


def _exit_outputs(exit_outputs) -> List[Tuple[str, str]]:
    """["head", ("head", "speculate_until"), ...] as (output, speculate_until) pairs."""
    pairs = []
    for entry in exit_outputs or ():
        if isinstance(entry, str):
            pairs.append((entry, ""))
        elif isinstance(entry, (tuple, list)) and len(entry) == 2 and all(
            isinstance(part, str) for part in entry
        ):
            pairs.append((entry[0], entry[1]))
        else:
            raise TypeError(
                f"exit_outputs: {entry!r} is neither an ONNX output name nor an "
                "(output, speculate_until) pair of names"
            )
    return pairs


def _build_arguments(device, mode, exits, threshold, threads, input_shapes, exit_outputs,
                     precision="fp32", max_folded_elements=None, conv_algorithms="heuristic"):
    args = _cgr.BuildArguments()
    args.device = device
    args.mode = mode
    args.exits = exits
    args.threshold = float(threshold)
    args.threads = int(threads)
    if precision not in ("fp32", "tf32", "fp16", "bf16"):
        raise ValueError(f"precision: {precision!r} is not 'fp32', 'tf32', 'fp16' or 'bf16'")
    args.precision = precision
    if conv_algorithms not in ("heuristic", "timed"):
        raise ValueError(
            f"conv_algorithms: {conv_algorithms!r} is not 'heuristic' or 'timed'")
    args.time_conv_algorithms = conv_algorithms == "timed"
    args.input_shapes = {
        name: [int(d) for d in shape] for name, shape in (input_shapes or {}).items()
    }
    args.exit_outputs = _exit_outputs(exit_outputs)
    if max_folded_elements is not None:
        if (isinstance(max_folded_elements, bool) or not isinstance(max_folded_elements, int)
                or max_folded_elements < 1):
            raise ValueError(
                f"max_folded_elements: a positive int, got {max_folded_elements!r}")
        args.max_folded_elements = max_folded_elements
    return args


class Result:
    """One inference's outputs and exit reports (cgr::Result).

    outputs: name -> array (NumPy or torch, the kind the inputs were); with exits='early', a
        fired exit leaves out what it skipped; unless exits are off, each head that ran is here
        under its exit's name.
    answered_by: the exit that answered, or "final" (None on the CUDA device path, which does
        not synchronise to read the decisions).
    exits: one ExitReport per exit head (name, ran, fired, confidence, top1); empty on the
        device path.
    non_finite_outputs: outputs holding NaN or infinities (None on the device path).
    """

    __slots__ = ("outputs", "answered_by", "exits", "non_finite_outputs")

    def __init__(self, outputs, answered_by, exits, non_finite_outputs):
        self.outputs: Dict[str, Any] = outputs
        self.answered_by: Optional[str] = answered_by
        self.exits: List[ExitReport] = list(exits)
        self.non_finite_outputs: Optional[List[str]] = non_finite_outputs

    def __getitem__(self, name: str):
        try:
            return self.outputs[name]
        except KeyError:
            raise KeyError(
                f"no output named {name!r} in this result (outputs: {', '.join(self.outputs)})"
            ) from None

    def __contains__(self, name: str) -> bool:
        return name in self.outputs

    def __iter__(self) -> Iterator[str]:
        return iter(self.outputs)

    def __len__(self) -> int:
        return len(self.outputs)

    def keys(self):
        return self.outputs.keys()

    def __repr__(self) -> str:
        shapes = ", ".join(f"{k}: {tuple(v.shape)}" for k, v in self.outputs.items())
        return f"Result(outputs={{{shapes}}}, answered_by={self.answered_by!r})"


class _ContextBase:
    """What Context and BucketedContext share: binding arguments to inputs, preparing arrays,
    and results in the callers' kind (torch in, torch out)."""

    def __init__(self, engine, native):
        self._engine = engine
        self._native = native

    @property
    def engine(self):
        return self._engine

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

    @staticmethod
    def _prepared(inputs: Mapping[str, Any]):
        """[(name, array)], whether any was a torch tensor, the names of those on CUDA."""
        if not isinstance(inputs, Mapping):
            raise TypeError(
                f"infer() takes a mapping of input names to arrays, got {type(inputs).__name__}"
            )
        prepared = []
        torch_in = False
        cuda_names = []
        for name, value in inputs.items():
            if not isinstance(name, str):
                raise TypeError(f"input names are strings, got {name!r}")
            array, is_torch, is_cuda = _prepare(name, value)
            prepared.append((name, array))
            torch_in = torch_in or is_torch
            if is_cuda:
                cuda_names.append(name)
        return prepared, torch_in, cuda_names

    def _infer_on_host(self, prepared, torch_in: bool) -> Result:
        outputs, answered_by, exits, non_finite = self._native.infer(prepared)
        if torch_in:
            torch = _torch_module()
            outputs = {name: torch.from_numpy(array) for name, array in outputs.items()}
        return Result(outputs, answered_by, exits, non_finite)


class Context(_ContextBase):
    """An execution context (cgr::ExecutionContext): its own activation buffers, sharing the
    engine's weights. One inference at a time: use one context per thread (a second thread is
    refused with cgr.Error). The GIL is released while it infers."""

    def infer(self, inputs: Mapping[str, Any]) -> Result:
        """Runs one inference on {input name: array}."""
        prepared, torch_in, cuda_names = self._prepared(inputs)
        if cuda_names and self._engine.device == "cuda":
            return self._infer_on_device(prepared)
        return self._infer_on_host(prepared, torch_in)

    def _infer_on_device(self, prepared) -> Result:
        torch = _torch_module()
        device = None
        for name, tensor in prepared:
            if not _is_torch_tensor(tensor) or tensor.device.type != "cuda":
                raise Error(
                    f"input {name!r} is not a torch CUDA tensor: the device path takes every "
                    "input as a torch CUDA tensor, all on one device"
                )
            if device is not None and tensor.device != device:
                raise Error(f"input {name!r} is on {tensor.device}, another input on {device}")
            device = tensor.device
        with torch.cuda.device(device):
            outputs = {
                spec.name: torch.empty(spec.shape, dtype=torch.float32, device=device)
                for spec in self._engine.outputs
            }
            stream = torch.cuda.current_stream(device).cuda_stream
            self._native.infer_on_device(prepared, list(outputs.items()), stream)
        return Result(outputs, None, [], None)

    @property
    def ops_executed(self) -> int:
        """Ops the last inference executed (fused ops count once, skipped ones not at all)."""
        return self._native.ops_executed()

    def executed_ops(self) -> List[str]:
        """Names of the ops the last inference executed, in execution order."""
        return self._native.executed_ops()


def _prepare(name: str, value: Any):
    """(array for _cgr, came from torch, is on a CUDA device)."""
    if _is_torch_tensor(value):
        tensor = value.detach()
        if not tensor.is_contiguous():
            tensor = tensor.contiguous()
        return tensor, True, tensor.device.type == "cuda"
    if isinstance(value, np.ndarray):
        if not value.flags.c_contiguous:
            value = np.ascontiguousarray(value)
        return value, False, False
    if hasattr(value, "__dlpack__") and hasattr(value, "__dlpack_device__"):
        # Another DLPack producer (CuPy, JAX, ...): taken as it is, results come back as NumPy.
        device_type, _ = value.__dlpack_device__()
        return value, False, int(device_type) == _DLPACK_CUDA
    raise TypeError(
        f"input {name!r}: expected a numpy.ndarray or a torch.Tensor (or another DLPack "
        f"producer), got {type(value).__name__}"
    )


class _EngineBase:
    """What Engine and BucketedEngine share: the facts of the build, and running on a context
    of the calling thread (made on first use). Subclasses set _native, _inputs, _outputs,
    _options and _contexts (a threading.local), and define create_context and _input_list."""

    @property
    def inputs(self) -> List[TensorSpec]:
        return list(self._inputs)

    @property
    def outputs(self) -> List[TensorSpec]:
        """The network's outputs and, unless exits are off, each exit head's logits."""
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

    @property
    def precision(self) -> str:
        return self._options["precision"]

    @property
    def conv_algorithms(self) -> str:
        return self._options["conv_algorithms"]

    def _thread_context(self):
        context = getattr(self._contexts, "context", None)
        if context is None:
            context = self.create_context()
            self._contexts.context = context
        return context

    def __call__(self, *args, **named) -> Result:
        """engine(x) / engine(name=x, ...): one inference on this thread's context."""
        return self._thread_context()(*args, **named)

    def infer(self, inputs: Mapping[str, Any]) -> Result:
        return self._thread_context().infer(inputs)


class Engine(_EngineBase):
    """A compiled network (cgr::Engine): fused ops, dependency graph, memory plan and weights,
    immutable after build. Calling it runs on a context of the calling thread (created on first
    use), so engine(x) is safe from several threads; create_context() gives one explicitly."""

    def __init__(self, native, source, what: str, build_arguments: Dict[str, Any]):
        # Use Engine.from_onnx or cgr.compile.
        self._native = native
        self._source = source  # the ONNX path or bytes, kept to build the other modes (benchmark)
        self._what = what
        self._build_arguments = build_arguments
        self._contexts = threading.local()
        self._inputs = [TensorSpec(n, tuple(s)) for n, s in native.inputs]
        self._outputs = [TensorSpec(n, tuple(s)) for n, s in native.outputs]
        self._options = native.options()

    @classmethod
    def from_onnx(
        cls,
        path: Union[str, os.PathLike, bytes],
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
    ) -> "Engine":
        """Imports an ONNX model (a path, or the model's bytes) and builds an engine.

        device: "cpu" | "cuda"; mode: "dag" | "eager" | "stream-graph" (cuda);
        exits: the exit policy, "off" | "all" | "early"; threshold: the confidence at which an
        exit fires, in [0, 1]; threads: CPU threads (0: one per hardware thread);
        input_shapes: {input: shape} for inputs with symbolic dims;
        exit_outputs: graph outputs that are exit heads, in backbone order, each a name or an
        (output, speculate_until) pair of ONNX tensor names (cgr::OnnxExit);
        precision: "fp32" | "tf32" | "fp16" | "bf16" (cgr::EngineOptions::precision: on the
        cpu its storage rounding is emulated; cuda has fp32 and tf32);
        max_folded_elements: the most elements constant folding may build in the import, all
        folded nodes together (cgr::OnnxImportOptions::max_folded_elements; None: its default,
        2^27): raise it for a model the import refuses for that reason;
        conv_algorithms: "heuristic" (cuDNN's choice, no runs at build) | "timed" (cuDNN runs its
        candidates at build and the fastest is kept, as torch.backends.cudnn.benchmark does;
        cgr::EngineOptions::time_conv_algorithms; no effect on the cpu).
        """
        arguments = dict(
            device=device,
            mode=mode,
            exits=exits,
            threshold=threshold,
            threads=threads,
            input_shapes=dict(input_shapes or {}),
            exit_outputs=_exit_outputs(exit_outputs),
            precision=precision,
            max_folded_elements=max_folded_elements,
            conv_algorithms=conv_algorithms,
        )
        if isinstance(path, (bytes, bytearray)):
            return cls._build(bytes(path), "ONNX model bytes", arguments)
        return cls._build(os.fspath(path), os.fspath(path), arguments)

    @classmethod
    def _build(cls, source, what: str, arguments: Dict[str, Any]) -> "Engine":
        native_arguments = _build_arguments(**arguments)
        if isinstance(source, bytes):
            native = _cgr.Engine.from_bytes(source, what, native_arguments)
        else:
            native = _cgr.Engine.from_file(source, native_arguments)
        return cls(native, source, what, arguments)

    def _rebuilt(self, **changes) -> "Engine":
        """The same model built again with some options changed (another mode, say)."""
        arguments = dict(self._build_arguments, **changes)
        return Engine._build(self._source, self._what, arguments)

    def info(self) -> Dict[str, Any]:
        """cgr::EngineInfo: layers, ops, edges, critical_path, critical_path_us, max_width,
        arena_bytes, activation_bytes, weight_bytes, channels_last_values (CPU: values kept
        NHWC from one op to the next)."""
        return self._native.info()

    def op_names(self) -> List[str]:
        """The ops in execution order, fused ones joined by '+'."""
        return self._native.op_names()

    def _input_list(self) -> str:
        return ", ".join(f"'{s.name}' {'x'.join(map(str, s.shape))}" for s in self._inputs)

    def __repr__(self) -> str:
        return (
            f"cgr.Engine({self._what!r}, device={self.device!r}, mode={self.mode!r}, "
            f"exits={self.exit_policy!r}, inputs=[{self._input_list()}], "
            f"outputs={[s.name for s in self._outputs]})"
        )

    # --- running it ------------------------------------------------------------------------
    def create_context(self) -> Context:
        return Context(self, self._native.create_context())

