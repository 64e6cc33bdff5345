"""Engines from PyTorch and ONNX: numbers against PyTorch, the kinds of arrays in and out,
what an engine and a result tell."""

import pathlib
import tempfile

import numpy as np
import pytest
import torch
import torch.nn as nn

import cgr
from conftest import relative_error


def test_compiled_two_branch_model_matches_pytorch(two_branch, image, two_branch_engine):
    want = two_branch(image).detach().numpy()
    got = two_branch_engine(image.numpy())["output"]
    assert relative_error(got, want) <= 1e-5
    eager = cgr.compile(two_branch, image, mode="eager", threads=1)
    assert eager.mode == "eager"
    assert relative_error(eager(image)["output"].numpy(), want) <= 1e-5


def test_precision_rounds_like_the_format(two_branch, two_branch_onnx, image):
    want = two_branch(image).detach().numpy()
    fp32 = cgr.Engine.from_onnx(two_branch_onnx, threads=1)
    assert fp32.precision == "fp32"
    for precision, bound in (("fp16", 1e-2), ("bf16", 5e-2)):
        engine = cgr.Engine.from_onnx(two_branch_onnx, threads=1, precision=precision)
        assert engine.precision == precision
        got = engine(image.numpy())["logits"]
        # Every value is one the format stores, and the error is the format's, not zero.
        stored = got.astype(np.float16) if precision == "fp16" else got
        if precision == "fp16":
            np.testing.assert_array_equal(stored.astype(np.float32), got)
        else:
            assert not np.any(got.view(np.uint32) & 0xFFFF)
        assert 0 < relative_error(got, want) <= bound
    with pytest.raises(ValueError, match="precision: 'half' is not"):
        cgr.Engine.from_onnx(two_branch_onnx, precision="half")


def test_conv_algorithms_option_reaches_the_engine(two_branch, two_branch_onnx, image):
    # "timed" is cuDNN's benchmark at build: on the cpu it is kept as asked and changes nothing.
    want = two_branch(image).detach().numpy()
    assert cgr.Engine.from_onnx(two_branch_onnx, threads=1).conv_algorithms == "heuristic"
    timed = cgr.Engine.from_onnx(two_branch_onnx, threads=1, conv_algorithms="timed")
    assert timed.conv_algorithms == "timed"
    assert relative_error(timed(image.numpy())["logits"], want) <= 1e-5
    compiled = cgr.compile(two_branch, image, threads=1, conv_algorithms="timed")
    assert compiled.conv_algorithms == "timed"
    bucketed = cgr.BucketedEngine.from_onnx(two_branch_onnx, buckets=[1], threads=1,
                                            conv_algorithms="timed")
    assert bucketed.conv_algorithms == "timed"
    with pytest.raises(ValueError, match="conv_algorithms: 'fastest' is not"):
        cgr.Engine.from_onnx(two_branch_onnx, conv_algorithms="fastest")


def test_numpy_in_numpy_out(two_branch_engine, image):
    result = two_branch_engine(image.numpy())
    out = result["output"]
    assert type(out) is np.ndarray
    assert out.dtype == np.float32 and out.shape == (1, 10)
    # The array owns its data: writable, and later inferences do not change it.
    assert out.flags.writeable and out.flags.c_contiguous
    kept = out.copy()
    two_branch_engine(np.zeros((1, 3, 16, 16), np.float32))
    np.testing.assert_array_equal(out, kept)


def test_torch_in_torch_out(two_branch, two_branch_engine, image):
    result = two_branch_engine(image)
    out = result["output"]
    assert isinstance(out, torch.Tensor)
    assert out.dtype == torch.float32 and out.device.type == "cpu" and tuple(out.shape) == (1, 10)
    assert relative_error(out.numpy(), two_branch(image).detach().numpy()) <= 1e-5
    # A tensor that requires grad is read without its graph; a non-contiguous one is made
    # contiguous first (a layout conversion only).
    with_grad = image.clone().requires_grad_(True)
    np.testing.assert_array_equal(two_branch_engine(with_grad)["output"].numpy(), out.numpy())
    transposed = image.transpose(2, 3).contiguous().transpose(2, 3)
    assert not transposed.is_contiguous()
    np.testing.assert_array_equal(two_branch_engine(transposed)["output"].numpy(), out.numpy())
    strided = np.asfortranarray(image.numpy())
    np.testing.assert_array_equal(two_branch_engine(strided)["output"], out.numpy())


def test_from_onnx_file_path_and_bytes(two_branch, two_branch_onnx, image):
    engine = cgr.Engine.from_onnx(two_branch_onnx, threads=1)
    assert engine.inputs == [cgr.TensorSpec("image", (1, 3, 16, 16))]
    assert engine.outputs == [cgr.TensorSpec("logits", (1, 10))]
    assert (engine.device, engine.mode, engine.exit_policy, engine.threads) == (
        "cpu", "dag", "all", 1)
    assert engine.threshold == pytest.approx(0.9)
    assert engine.exit_names == []
    want = two_branch(image).detach().numpy()
    assert relative_error(engine(image.numpy())["logits"], want) <= 1e-5
    from_str = cgr.Engine.from_onnx(str(two_branch_onnx), threads=1)
    from_bytes = cgr.Engine.from_onnx(pathlib.Path(two_branch_onnx).read_bytes(), threads=1)
    for other in (from_str, from_bytes):
        np.testing.assert_array_equal(other(image.numpy())["logits"],
                                      engine(image.numpy())["logits"])


def test_engine_info_and_ops(two_branch_engine):
    info = two_branch_engine.info()
    assert set(info) == {"layers", "ops", "edges", "critical_path", "critical_path_us",
                         "max_width", "arena_bytes", "activation_bytes", "weight_bytes",
                         "channels_last_values"}
    # Two branches run side by side: the graph is at least two wide and its longest chain is
    # shorter than the op count. BatchNorm and ReLU fold into the convs.
    assert info["max_width"] >= 2
    assert 0 < info["critical_path"] < info["ops"] < info["layers"]
    assert 0 < info["arena_bytes"] <= info["activation_bytes"]
    # 3x3 convs 3->8, 8->8, 3->8, a 1x1 8->8 and Linear 16->10: weights and biases in float32.
    params = (8 * 3 * 9 + 8) + (8 * 8 * 9 + 8) + (8 * 3 * 9 + 8) + (8 * 8 + 8) + (16 * 10 + 10)
    assert info["weight_bytes"] >= 4 * params
    # On AVX-512 the right branch's 3->8 conv (oneDNN, few input channels) writes its output
    # NHWC for the 1x1 conv after it, which reads points as rows: one value is channels-last.
    # Without AVX-512 both stay on cgr's NCHW kernels.
    cpu_flags = pathlib.Path("/proc/cpuinfo").read_text().split()
    assert info["channels_last_values"] == (1 if "avx512f" in cpu_flags else 0)
    names = two_branch_engine.op_names()
    assert len(names) == info["ops"] and all(isinstance(n, str) and n for n in names)
    assert any("+" in n for n in names)  # fused conv + BatchNorm + ReLU
    assert "device='cpu'" in repr(two_branch_engine)


def test_contexts_and_result(two_branch_engine, image):
    ctx = two_branch_engine.create_context()
    result = ctx(image.numpy())
    same = ctx.infer({"image": image.numpy()})
    np.testing.assert_array_equal(result["output"], same["output"])
    np.testing.assert_array_equal(result["output"], two_branch_engine(image.numpy())["output"])
    assert result.answered_by == "final"
    assert result.exits == []
    assert result.non_finite_outputs == []
    assert list(result) == ["output"] and "output" in result and len(result) == 1
    assert ctx.ops_executed == two_branch_engine.info()["ops"]
    assert sorted(ctx.executed_ops()) == sorted(two_branch_engine.op_names())
    with pytest.raises(KeyError, match=r"no output named 'logits' in this result \(outputs: output\)"):
        result["logits"]
    nan_input = np.full((1, 3, 16, 16), np.nan, np.float32)
    assert ctx(nan_input).non_finite_outputs == ["output"]


class TwoInputs(nn.Module):
    def __init__(self):
        super().__init__()
        self.a = nn.Conv2d(3, 4, 3, padding=1)
        self.b = nn.Conv2d(2, 4, 1)

    def forward(self, rgb, depth):
        return torch.relu(self.a(rgb)) + self.b(depth)


def test_several_inputs_bind_by_name():
    torch.manual_seed(3)
    model = TwoInputs().eval()
    rgb, depth = torch.randn(1, 3, 8, 8), torch.randn(1, 2, 8, 8)
    engine = cgr.compile(model, (rgb, depth), threads=1)
    assert [s.name for s in engine.inputs] == ["rgb", "depth"]  # forward's parameter names
    want = model(rgb, depth).detach().numpy()
    assert relative_error(engine(rgb=rgb, depth=depth)["output"].numpy(), want) <= 1e-5
    got = engine.create_context().infer({"depth": depth.numpy(), "rgb": rgb.numpy()})
    assert relative_error(got["output"], want) <= 1e-5
    with pytest.raises(cgr.Error, match=r"this engine has 2 inputs \('rgb' 1x3x8x8, 'depth' "
                                        r"1x2x8x8\): pass them by name"):
        engine(rgb)
    with pytest.raises(cgr.Error, match=r"input 'depth' \(1x2x8x8\) is missing"):
        engine(rgb=rgb)


def test_compile_names_outputs_and_keeps_no_files(two_branch, image, tmp_path, monkeypatch):
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(scratch))
    kept = tmp_path / "kept.onnx"
    engine = cgr.compile(two_branch, image, output_names=["scores"], input_names=["pixels"],
                         keep_onnx=kept, threads=1)
    assert list(scratch.iterdir()) == []  # the exported file and its folder are gone
    assert [s.name for s in engine.inputs] == ["pixels"]
    assert [s.name for s in engine.outputs] == ["scores"]
    assert kept.stat().st_size > 0
    reloaded = cgr.Engine.from_onnx(kept, threads=1)
    np.testing.assert_array_equal(reloaded(image.numpy())["scores"],
                                  engine(image.numpy())["scores"])


def test_compile_leaves_a_training_module_as_it_was(image):
    from conftest import TwoBranch, seeded

    model = seeded(TwoBranch(), 9).train()
    before = {k: v.clone() for k, v in model.state_dict().items()}
    engine = cgr.compile(model, image, threads=1)  # exported, and its outputs counted, in eval
    assert model.training
    for k, v in model.state_dict().items():
        assert torch.equal(v, before[k]), f"{k} changed"
    want = model.eval()(image).detach().numpy()
    assert relative_error(engine(image)["output"].numpy(), want) <= 1e-5


def test_from_onnx_max_folded_elements_bounds_constant_folding():
    onnx = pytest.importorskip("onnx")
    from onnx import TensorProto, helper

    # A 2-element shape expands to 2^20 elements, then Concat doubles it: 3 * 2^20 in all.
    shape = helper.make_tensor("shape", TensorProto.INT64, [2], [1024, 1024])
    nodes = [
        helper.make_node("ConstantOfShape", ["shape"], ["big"], name="fill"),
        helper.make_node("Concat", ["big", "big"], ["twice"], name="cat", axis=0),
        helper.make_node("Relu", ["x"], ["y"], name="relu"),
    ]
    graph = helper.make_graph(
        nodes, "folding", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4])], [shape])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    data = model.SerializeToString()
    with pytest.raises(cgr.Error, match=r"node 'cat' \(Concat\): constant folding would build "
                                        r"more than 3145728 elements .* max_folded_elements=N"):
        cgr.Engine.from_onnx(data, threads=1, max_folded_elements=3 << 20)
    engine = cgr.Engine.from_onnx(data, threads=1, max_folded_elements=5 << 20)
    x = np.array([[-1.0, 2.0, -3.0, 4.0]], dtype=np.float32)
    np.testing.assert_array_equal(engine(x)["y"], np.maximum(x, 0))
    for bad in (0, -1, 2.5, True):
        with pytest.raises(ValueError, match="max_folded_elements: a positive int"):
            cgr.Engine.from_onnx(data, max_folded_elements=bad)
