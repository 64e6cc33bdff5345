"""cgr.BucketedEngine: one engine per batch size from an ONNX model with a symbolic batch. A
batch runs on the smallest bucket that holds it; the results hold its rows only and equal
PyTorch's; what does not fit, and bad bucket lists, are refused by name."""

import threading

import numpy as np
import pytest
import torch

import cgr
from conftest import relative_error


def export_with_symbolic_batch(model, example, path, output_names):
    # In eval mode: export puts the module back in the mode it found it in, and a wrapper's
    # training mode would pass to the shared fixture model inside it.
    model.eval()
    torch.onnx.export(model, (example,), str(path), input_names=["image"],
                      output_names=output_names, opset_version=17,
                      dynamic_axes={n: {0: "batch"} for n in ["image"] + output_names})
    return path


@pytest.fixture(scope="module")
def two_branch_batched_onnx(tmp_path_factory, two_branch, image):
    path = tmp_path_factory.mktemp("buckets") / "two_branch.onnx"
    return export_with_symbolic_batch(two_branch, image, path, ["logits"])


class HeadsOnly(torch.nn.Module):
    """The exits model's final output and its two heads (not the speculation point)."""

    def __init__(self, model):
        super().__init__()
        self.model = model

    def forward(self, image):
        final, exit0, exit1, _ = self.model(image)
        return final, exit0, exit1


@pytest.fixture(scope="module")
def exits_batched_onnx(tmp_path_factory, exits_model, image):
    path = tmp_path_factory.mktemp("buckets") / "exits.onnx"
    return export_with_symbolic_batch(HeadsOnly(exits_model), image, path,
                                      ["final", "exit0", "exit1"])


@pytest.fixture(scope="module")
def batches():
    generator = torch.Generator().manual_seed(11)
    return {n: torch.randn(n, 3, 16, 16, generator=generator) for n in range(1, 6)}


def test_each_batch_runs_on_the_smallest_bucket_that_holds_it(two_branch, two_branch_batched_onnx,
                                                              batches):
    engine = cgr.BucketedEngine.from_onnx(two_branch_batched_onnx, buckets=[4, 1, 2], threads=1)
    assert engine.buckets == [1, 2, 4] and engine.max_batch == 4
    assert [engine.bucket_for(n) for n in (1, 2, 3, 4)] == [1, 2, 4, 4]
    ctx = engine.create_context()
    assert ctx.last_bucket == 0
    for n, want_bucket in ((1, 1), (2, 2), (3, 4), (4, 4), (1, 1)):
        x = batches[n]
        result = ctx(x.numpy())
        assert ctx.last_bucket == want_bucket
        assert list(result.outputs) == ["logits"]
        assert result["logits"].shape == (n, 10)  # the real rows only, not the padding
        with torch.no_grad():
            want = two_branch(x).numpy()
        assert relative_error(result["logits"], want) <= 1e-5
        assert result.answered_by == "final" and result.exits == []


def test_describes_inputs_and_outputs_per_sample(two_branch_batched_onnx):
    engine = cgr.BucketedEngine.from_onnx(two_branch_batched_onnx, buckets=[1, 8], threads=1,
                                          exits="off", mode="eager")
    assert engine.inputs == [cgr.TensorSpec("image", (3, 16, 16))]
    assert engine.outputs == [cgr.TensorSpec("logits", (10,))]
    assert engine.exit_names == []
    assert (engine.device, engine.mode, engine.exit_policy, engine.threads) == (
        "cpu", "eager", "off", 1)
    assert engine.threshold == pytest.approx(0.9)
    assert "buckets=[1, 8]" in repr(engine) and "'image' n x 3x16x16" in repr(engine)


def test_a_batch_larger_than_every_bucket_is_refused_and_the_context_stays_usable(
        two_branch_batched_onnx, batches):
    engine = cgr.BucketedEngine.from_onnx(two_branch_batched_onnx, buckets=[1, 2, 4], threads=1)
    ctx = engine.create_context()
    with pytest.raises(cgr.Error, match=r"a batch of 5 is larger than the largest bucket \(4; "
                                        r"buckets: 1, 2, 4\)"):
        ctx(batches[5].numpy())
    with pytest.raises(cgr.Error, match="larger than the largest bucket"):
        engine.bucket_for(5)
    with pytest.raises(cgr.Error, match=r"input 'image' has shape 2x3x8x8, expected n x 3x16x16"):
        ctx(np.zeros((2, 3, 8, 8), np.float32))
    with pytest.raises(cgr.Error, match=r"no input named 'pixels' \(inputs: image\)"):
        ctx.infer({"pixels": batches[1].numpy()})
    assert ctx(batches[2].numpy())["logits"].shape == (2, 10)
    assert ctx.last_bucket == 2


@pytest.mark.parametrize("buckets, message", [
    ([], "the list is empty"),
    ([0, 2], "0 is not a batch size"),
    ([2, 4, 2], r"\[2, 2, 4\] lists a size twice"),
])
def test_bad_bucket_lists_are_refused(two_branch_batched_onnx, buckets, message):
    with pytest.raises(cgr.Error, match=message):
        cgr.BucketedEngine.from_onnx(two_branch_batched_onnx, buckets=buckets)


def test_bad_arguments_are_refused_by_name(two_branch_batched_onnx, tmp_path):
    with pytest.raises(TypeError, match="takes a path to an ONNX file, not bytes"):
        cgr.BucketedEngine.from_onnx(two_branch_batched_onnx.read_bytes())
    with pytest.raises(TypeError, match="a sequence of batch sizes"):
        cgr.BucketedEngine.from_onnx(two_branch_batched_onnx, buckets=["one"])
    with pytest.raises(cgr.Error, match="missing.onnx"):
        cgr.BucketedEngine.from_onnx(tmp_path / "missing.onnx")


def test_exit_heads_report_every_row(exits_model, exits_batched_onnx, batches):
    """Head 0 is sure of class 3 whatever the image (conftest), head 1 is not."""
    with torch.no_grad():
        final, exit0, exit1, _ = exits_model(batches[3])
    engine = cgr.BucketedEngine.from_onnx(exits_batched_onnx, buckets=[1, 2, 4], exits="all",
                                          exit_outputs=["exit0", "exit1"], threads=1)
    assert engine.exit_names == ["exit0", "exit1"]
    result = engine(batches[3])
    assert isinstance(result["final"], torch.Tensor)  # torch in, torch out
    assert result.answered_by == "final"
    for name, want in (("final", final), ("exit0", exit0), ("exit1", exit1)):
        assert tuple(result[name].shape) == (3, 5)
        assert relative_error(result[name].numpy(), want.numpy()) <= 1e-5
    report0, report1 = result.exits
    assert report0.fired and report0.top1 == [3, 3, 3] and len(report0.confidence) == 3
    probabilities = torch.softmax(exit1, dim=1)
    assert report1.confidence == pytest.approx(probabilities.max(1).values.tolist(), rel=1e-5)
    assert not report1.fired

    early = cgr.BucketedEngine.from_onnx(exits_batched_onnx, buckets=[1, 2, 4], exits="early",
                                         exit_outputs=["exit0", "exit1"], threads=1)
    ctx = early.create_context()
    result = ctx(batches[3].numpy())
    assert ctx.last_bucket == 4
    assert result.answered_by == "exit0"  # every row confident, the padding copies too
    assert list(result.outputs) == ["exit0"]
    assert relative_error(result["exit0"], exit0.numpy()) <= 1e-5
    assert not result.exits[1].ran and result.exits[1].confidence == []


def test_one_context_per_thread(two_branch, two_branch_batched_onnx, batches):
    engine = cgr.BucketedEngine.from_onnx(two_branch_batched_onnx, buckets=[1, 2, 4], threads=1)
    with torch.no_grad():
        want = {n: two_branch(batches[n]).numpy() for n in (1, 2, 3, 4)}
    errors = []

    def work(seed):
        order = np.random.default_rng(seed).permutation([1, 2, 3, 4] * 5)
        for n in order:
            got = engine(batches[int(n)].numpy())["logits"]  # this thread's own context
            if relative_error(got, want[int(n)]) > 1e-5:
                errors.append(f"thread {seed}: batch {n} differs")

    threads = [threading.Thread(target=work, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
