"""Exit heads declared on a PyTorch model (cgr.compile) or on an ONNX file
(Engine.from_onnx(exit_outputs=...)): which exit answers, what each head reports, and the
numbers against PyTorch. Head 0 of the model is sure of class 3 (its bias dominates), head 1
is not (uniform over 5 classes)."""

import pytest
import torch

import cgr
from conftest import relative_error

NAMES = ["final", "exit0", "exit1", "stage2"]


@pytest.fixture(scope="module")
def x():
    return torch.randn(1, 3, 16, 16, generator=torch.Generator().manual_seed(5))


@pytest.fixture(scope="module")
def reference(exits_model, x):
    with torch.no_grad():
        final, exit0, exit1, _ = exits_model(x)
    return {"final": final.numpy(), "exit0": exit0.numpy(), "exit1": exit1.numpy()}


def compiled(model, x, exits, policy, threshold=0.9):
    return cgr.compile(model, x, output_names=NAMES, exits=exits, exit_policy=policy,
                       threshold=threshold, threads=2)


def test_policy_all_runs_every_head_and_reports_it(exits_model, x, reference):
    engine = compiled(exits_model, x, ["exit0", "exit1"], "all")
    assert engine.exit_names == ["exit0", "exit1"]
    assert [s.name for s in engine.outputs] == ["final", "stage2", "exit0", "exit1"]
    result = engine(x)
    assert result.answered_by == "final"  # policy all: the whole network runs
    for name in ("final", "exit0", "exit1"):
        assert relative_error(result[name].numpy(), reference[name]) <= 1e-5
    exit0, exit1 = result.exits
    assert (exit0.name, exit0.ran, exit0.fired, exit0.top1) == ("exit0", True, True, [3])
    assert (exit1.name, exit1.ran, exit1.fired) == ("exit1", True, False)
    # Confidence: the largest softmax probability of each head's logits.
    for report in result.exits:
        probabilities = torch.softmax(torch.from_numpy(reference[report.name]), dim=1)
        assert report.confidence == pytest.approx([probabilities.max().item()], rel=1e-5)
        assert report.top1 == [int(probabilities.argmax())]
    assert exit1.confidence[0] < 0.9 <= exit0.confidence[0]


def test_policy_early_answers_at_the_first_confident_exit(exits_model, x, reference):
    engine = compiled(exits_model, x, ["exit0", "exit1"], "early")
    ctx = engine.create_context()
    result = ctx(x.numpy())
    assert result.answered_by == "exit0"
    assert list(result.outputs) == ["exit0"]  # the final output and head 1 were skipped
    assert relative_error(result["exit0"], reference["exit0"]) <= 1e-5
    exit0, exit1 = result.exits
    assert exit0.fired and exit0.ran
    assert not exit1.ran and not exit1.fired and exit1.confidence == [] and exit1.top1 == []
    assert ctx.ops_executed < engine.info()["ops"]


def test_policy_early_runs_to_the_end_when_no_exit_fires(exits_model, x, reference):
    engine = compiled(exits_model, x, ["exit1"], "early")  # only the unsure head
    result = engine(x)
    assert result.answered_by == "final"
    assert not result.exits[0].fired and result.exits[0].ran
    assert relative_error(result["final"].numpy(), reference["final"]) <= 1e-5


def test_policy_off_prunes_the_heads(exits_model, x, reference):
    engine = compiled(exits_model, x, ["exit0", "exit1"], "off")
    assert engine.exit_names == []
    assert [s.name for s in engine.outputs] == ["final", "stage2"]
    result = engine(x)
    assert result.exits == [] and result.answered_by == "final"
    assert relative_error(result["final"].numpy(), reference["final"]) <= 1e-5


def test_speculation_point_keeps_the_next_stage_running(exits_model, x):
    speculating = compiled(exits_model, x, [("exit0", "stage2"), "exit1"], "early")
    # stage2 only names the speculation point: it is not an output of the engine.
    assert [s.name for s in speculating.outputs] == ["final", "exit0", "exit1"]
    waiting = compiled(exits_model, x, ["exit0", "exit1"], "early")
    ran = {}
    for name, engine in (("speculating", speculating), ("waiting", waiting)):
        ctx = engine.create_context()
        assert ctx(x).answered_by == "exit0"
        ran[name] = ctx.executed_ops()
    # Beside head 0, the speculating engine computed stage 2 (which head 0's firing then made
    # useless); the waiting one did not. Neither ran stage 3.
    assert any(op.startswith("stage2") for op in ran["speculating"])
    assert not any(op.startswith("stage2") for op in ran["waiting"])
    assert not any(op.startswith("stage3") for op in ran["speculating"] + ran["waiting"])
    assert set(ran["waiting"]) < set(ran["speculating"])


def test_exit_outputs_of_an_onnx_file(exits_model, x, reference, tmp_path):
    path = tmp_path / "exits.onnx"
    torch.onnx.export(exits_model, (x,), str(path), input_names=["image"], output_names=NAMES,
                      opset_version=17)
    engine = cgr.Engine.from_onnx(path, exits="early", exit_outputs=["exit0", "exit1"], threads=1)
    result = engine(x.numpy())
    assert result.answered_by == "exit0"
    assert relative_error(result["exit0"], reference["exit0"]) <= 1e-5
    # (output, speculate_until) pairs of ONNX tensor names; stage2 is a graph output here, and
    # stays one.
    speculating = cgr.Engine.from_onnx(path, exits="all", exit_outputs=[("exit0", "stage2")],
                                       threads=1)
    assert [s.name for s in speculating.outputs] == ["final", "exit1", "stage2", "exit0"]
    with pytest.raises(cgr.Error, match=r"exit 'logits' is not a graph output \(outputs: final, "
                                        r"exit0, exit1, stage2\)"):
        cgr.Engine.from_onnx(path, exit_outputs=["logits"])
    with pytest.raises(cgr.Error, match=r"exit 'stage2' has shape 1x8x16x16; an exit head's "
                                        r"logits must be N x classes"):
        cgr.Engine.from_onnx(path, exit_outputs=["stage2"])
    with pytest.raises(TypeError, match=r"exit_outputs: 3 is neither"):
        cgr.Engine.from_onnx(path, exit_outputs=[3])


def test_compile_refuses_exits_it_cannot_name(exits_model, x):
    with pytest.raises(ValueError, match=r"exits: exit 'head0' is not one of the module's outputs "
                                         r"\(final, exit0, exit1, stage2\)"):
        compiled(exits_model, x, ["head0"], "all")
    with pytest.raises(ValueError, match=r"exits: speculate_until 'stage9' is not one of"):
        compiled(exits_model, x, [("exit0", "stage9")], "all")
    with pytest.raises(ValueError, match=r"exits: a head is listed twice"):
        compiled(exits_model, x, ["exit0", "exit0"], "all")
    with pytest.raises(ValueError, match=r"'exit1' is both an exit head and a speculation point"):
        compiled(exits_model, x, [("exit0", "exit1"), "exit1"], "all")
