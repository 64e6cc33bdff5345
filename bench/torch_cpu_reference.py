#!/usr/bin/python3
"""PyTorch CPU latency of the models cgr's samples build, for side-by-side comparison.

Run with Debian's interpreter (python3-torch, python3-torchvision):
    /usr/bin/python3 bench/torch_cpu_reference.py [--threads 2] [--iterations 30]
Prints the median eager-mode latency of torchvision's ResNet-18 (1x3x224x224) and of the
two-branch network (3x3 convs + ReLU, 32 channels) at a small and a large input size.
"""
import argparse
import statistics
import time

import torch
import torchvision


class TwoBranch(torch.nn.Module):
    def __init__(self, channels=3, width=32):
        super().__init__()

        def chain():
            layers = []
            c = channels
            for _ in range(3):
                layers += [torch.nn.Conv2d(c, width, 3, padding=1), torch.nn.ReLU()]
                c = width
            return torch.nn.Sequential(*layers)

        self.group1 = chain()
        self.group2 = chain()

    def forward(self, x):
        return torch.cat((self.group1(x), self.group2(x)), dim=1)


def median_ms(model, x, iterations):
    with torch.inference_mode():
        for _ in range(3):
            model(x)
        times = []
        for _ in range(iterations):
            start = time.perf_counter()
            model(x)
            times.append((time.perf_counter() - start) * 1000.0)
    return statistics.median(times)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--iterations", type=int, default=30)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads, eager, inference_mode")
    resnet = torchvision.models.resnet18().eval()
    ms = median_ms(resnet, torch.randn(1, 3, 224, 224), args.iterations)
    print(f"  resnet18 1x3x224x224      {ms:9.3f} ms")
    two = TwoBranch().eval()
    for size in (16, 224):
        ms = median_ms(two, torch.randn(1, 3, size, size), args.iterations * (10 if size < 64 else 1))
        print(f"  two-branch 1x3x{size}x{size}  {ms:9.3f} ms")


if __name__ == "__main__":
    main()
