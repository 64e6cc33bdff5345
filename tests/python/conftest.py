"""Models shared by the suites of the Python package: small enough to export and build in a
second on two cores, shaped like what cgr is for (parallel branches, exit heads)."""

import numpy as np
import pytest
import torch
import torch.nn as nn

import cgr


def conv_block(cin: int, cout: int) -> nn.Sequential:
    return nn.Sequential(nn.Conv2d(cin, cout, 3, padding=1), nn.BatchNorm2d(cout), nn.ReLU())


def randomise_batch_norms(module: nn.Module, seed: int) -> None:
    """Running statistics and affine terms away from their identity defaults, so that folding
    BatchNorm into the conv is actually exercised."""
    generator = torch.Generator().manual_seed(seed)
    for m in module.modules():
        if isinstance(m, nn.BatchNorm2d):
            c = m.num_features
            m.running_mean.copy_(torch.randn(c, generator=generator) * 0.1)
            m.running_var.copy_(torch.rand(c, generator=generator) + 0.5)
            m.weight.data.copy_(torch.rand(c, generator=generator) + 0.5)
            m.bias.data.copy_(torch.randn(c, generator=generator) * 0.1)


class TwoBranch(nn.Module):
    """Two independent conv chains on one input, concatenated, then a classifier."""

    def __init__(self):
        super().__init__()
        self.left = nn.Sequential(conv_block(3, 8), conv_block(8, 8))
        self.right = nn.Sequential(conv_block(3, 8), nn.Conv2d(8, 8, 1), nn.ReLU())
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(16, 10)

    def forward(self, image):
        y = torch.cat([self.left(image), self.right(image)], dim=1)
        return self.fc(torch.flatten(self.pool(y), 1))


class WithExits(nn.Module):
    """A three-stage backbone with a head after stages 1 and 2. Returns (final, exit0, exit1,
    stage2): stage2 is returned only to name exit0's speculation point."""

    def __init__(self, classes: int = 5):
        super().__init__()
        self.stage1 = conv_block(3, 8)
        self.stage2 = conv_block(8, 8)
        self.stage3 = conv_block(8, 8)
        self.head0 = nn.Sequential(nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(8, classes))
        self.head1 = nn.Sequential(nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(8, classes))
        self.final = nn.Sequential(nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(8, classes))

    def forward(self, image):
        s1 = self.stage1(image)
        s2 = self.stage2(s1)
        s3 = self.stage3(s2)
        return self.final(s3), self.head0(s1), self.head1(s2), s2


def seeded(module: nn.Module, seed: int) -> nn.Module:
    torch.manual_seed(seed)
    for p in module.parameters():
        p.data.copy_(torch.randn_like(p) * 0.3)
    randomise_batch_norms(module, seed)
    return module.eval()


def relative_error(got, want) -> float:
    got = np.asarray(got, dtype=np.float64)
    want = np.asarray(want, dtype=np.float64)
    assert got.shape == want.shape, (got.shape, want.shape)
    return float(np.abs(got - want).max() / max(np.abs(want).max(), 1e-30))


@pytest.fixture(scope="session")
def two_branch():
    with torch.no_grad():
        return seeded(TwoBranch(), 1)


@pytest.fixture(scope="session")
def image():
    return torch.randn(1, 3, 16, 16, generator=torch.Generator().manual_seed(7))


@pytest.fixture(scope="session")
def two_branch_engine(two_branch, image):
    return cgr.compile(two_branch, image, threads=2)


@pytest.fixture(scope="session")
def two_branch_onnx(tmp_path_factory, two_branch, image):
    """The same model as an ONNX file, for Engine.from_onnx."""
    path = tmp_path_factory.mktemp("onnx") / "two_branch.onnx"
    torch.onnx.export(two_branch, (image,), str(path), input_names=["image"],
                      output_names=["logits"], opset_version=17)
    return path


@pytest.fixture(scope="session")
def exits_model():
    with torch.no_grad():
        model = seeded(WithExits(), 2)
        # Head 0 is sure of class 3 whatever the image (its bias dominates); head 1 is not.
        model.head0[2].weight.mul_(0.01)
        model.head0[2].bias.copy_(torch.tensor([0.0, 0.0, 0.0, 20.0, 0.0]))
        model.head1[2].weight.mul_(0.01)
        model.head1[2].bias.zero_()
    return model
