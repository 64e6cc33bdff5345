"""cgr.compile: a torch.nn.Module to an Engine, through torch.onnx.export.

Naming convention. The module's forward returns a tensor or a tuple of tensors; output_names
names them in order (default "output" for one, "output0", "output1", ... for several). `exits`
names which returned outputs are exit heads (N x classes logits), in backbone order, each
either a name or a (head, speculate_until) pair. speculate_until names another returned
tensor: the backbone value that keeps being computed while the head decides (e.g. the next
stage's output). It is returned only to name it: compile() drops it from the exported graph's
outputs, so the engine's outputs are the final ones plus the heads.
"""

from __future__ import annotations

import os
import tempfile
from typing import Iterable, List, Optional, Sequence, Tuple, Union

from ._engine import Engine

__all__ = ["compile"]


def _as_tuple(example_inputs) -> tuple:
    import torch

    if isinstance(example_inputs, torch.Tensor):
        return (example_inputs,)
    if isinstance(example_inputs, (tuple, list)) and all(
        isinstance(x, torch.Tensor) for x in example_inputs
    ):
        return tuple(example_inputs)
    raise TypeError(
        "example_inputs: expected a torch.Tensor or a tuple of them, got "
        f"{type(example_inputs).__name__}"
    )


def _count_outputs(module, args: tuple) -> int:
    import torch

    # In eval mode, as the export runs it: a module in training mode would otherwise update its
    # BatchNorm statistics here.
    was_training = getattr(module, "training", False)
    if was_training:
        module.eval()
    try:
        with torch.no_grad():
            result = module(*args)
    finally:
        if was_training:
            module.train()
    if isinstance(result, torch.Tensor):
        return 1
    if isinstance(result, (tuple, list)) and all(isinstance(t, torch.Tensor) for t in result):
        return len(result)
    raise TypeError(
        f"{type(module).__name__}.forward returns {type(result).__name__}; cgr.compile takes a "
        "module returning a tensor or a tuple of tensors"
    )


def _default_input_names(module, count: int) -> List[str]:
    """forward's parameter names when they are plain positional ones, else input0, input1..."""
    import inspect

    try:
        parameters = list(inspect.signature(module.forward).parameters.values())
    except (TypeError, ValueError):
        parameters = []
    positional = [
        p.name
        for p in parameters
        if p.kind in (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
    ]
    if len(positional) >= count:
        return positional[:count]
    return ["input"] if count == 1 else [f"input{i}" for i in range(count)]


def _split_exits(exits, output_names: List[str]) -> Tuple[List[Tuple[str, str]], List[str]]:
    """(exit heads as (head, speculate_until) pairs, returned tensors that only name a
    speculation point)."""
    heads: List[Tuple[str, str]] = []
    for entry in exits or ():
        if isinstance(entry, str):
            head, speculate = entry, ""
        elif isinstance(entry, (tuple, list)) and len(entry) == 2:
            head, speculate = entry
        else:
            raise TypeError(
                f"exits: {entry!r} is neither an output name nor a (head, speculate_until) pair"
            )
        for role, name in (("exit", head), ("speculate_until", speculate)):
            if name and name not in output_names:
                raise ValueError(
                    f"exits: {role} {name!r} is not one of the module's outputs "
                    f"({', '.join(output_names)}); name them with output_names=[...]"
                )
        heads.append((head, speculate))
    head_names = [h for h, _ in heads]
    if len(set(head_names)) != len(head_names):
        raise ValueError(f"exits: a head is listed twice ({', '.join(head_names)})")
    markers = sorted({s for _, s in heads if s})
    for marker in markers:
        if marker in head_names:
            raise ValueError(f"exits: {marker!r} is both an exit head and a speculation point")
    return heads, markers


def _drop_graph_outputs(model_bytes: bytes, names: List[str]) -> bytes:
    """The model with `names` removed from its graph outputs (they stay computed tensors)."""
    if not names:
        return model_bytes
    try:
        import onnx
    except ImportError as error:
        raise ImportError(
            "cgr.compile needs the onnx package to use speculation points (exits with "
            "speculate_until): Debian's python3-onnx or pip's onnx"
        ) from error
    model = onnx.load_from_string(model_bytes)
    kept = [o for o in model.graph.output if o.name not in names]
    del model.graph.output[:]
    model.graph.output.extend(kept)
    return model.SerializeToString()


def compile(
    module,
    example_inputs,
    *,
    exits: Iterable[Union[str, Tuple[str, str]]] = (),
    output_names: Optional[Sequence[str]] = None,
    input_names: Optional[Sequence[str]] = None,
    device: str = "cpu",
    mode: str = "dag",
    exit_policy: str = "all",
    threshold: float = 0.9,
    threads: int = 0,
    precision: str = "fp32",
    conv_algorithms: str = "heuristic",
    opset: int = 17,
    keep_onnx: Optional[Union[str, os.PathLike]] = None,
) -> Engine:
    """Exports `module` with torch.onnx.export and builds a cgr Engine from it.

    example_inputs: a tensor or tuple of tensors; their shapes are the engine's input shapes.
    exits: returned outputs that are exit heads (see the module docstring); exit_policy is
        the engine's exit policy ("off" | "all" | "early") and threshold its confidence.
    output_names / input_names: names of the returned tensors / forward's arguments (default:
        "output" or output0.., forward's parameter names).
    device, mode, threads, precision, conv_algorithms: as Engine.from_onnx. opset: the ONNX
        opset to export (7-21; torch 1.13 exports up to 17). keep_onnx: also write the exported
        model to this path.
    The module is exported in eval mode; nothing is left in the temporary folder.
    """
    import torch

    args = _as_tuple(example_inputs)
    if output_names is None:
        count = _count_outputs(module, args)
        output_names = ["output"] if count == 1 else [f"output{i}" for i in range(count)]
    output_names = list(output_names)
    if len(set(output_names)) != len(output_names):
        raise ValueError(f"output_names has a repeated name: {output_names}")
    input_names = list(input_names) if input_names is not None else _default_input_names(
        module, len(args)
    )
    if len(input_names) != len(args):
        raise ValueError(
            f"{len(input_names)} input_names ({', '.join(input_names)}) for {len(args)} "
            "example inputs"
        )
    heads, markers = _split_exits(exits, output_names)

    with tempfile.TemporaryDirectory(prefix="cgr-compile-") as folder:
        path = os.path.join(folder, "model.onnx")
        torch.onnx.export(
            module,
            args,
            path,
            input_names=input_names,
            output_names=output_names,
            opset_version=opset,
            do_constant_folding=True,
            training=torch.onnx.TrainingMode.EVAL,
        )
        with open(path, "rb") as f:
            model_bytes = f.read()
    model_bytes = _drop_graph_outputs(model_bytes, markers)
    if keep_onnx is not None:
        with open(keep_onnx, "wb") as f:
            f.write(model_bytes)
    what = f"torch.onnx.export of {type(module).__name__}"
    return Engine._build(
        model_bytes,
        what,
        dict(
            device=device,
            mode=mode,
            exits=exit_policy,
            threshold=threshold,
            threads=threads,
            input_shapes={},
            exit_outputs=heads,
            precision=precision,
            conv_algorithms=conv_algorithms,
        ),
    )
