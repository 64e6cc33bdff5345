#!/usr/bin/env python3
"""PyTorch on the same GPU as cgr, the same networks with the same weights, side by side.

For each built-in model of cgr-bench this script
  1. writes a seeded input (.npy) and runs cgr-bench once on it, which exports the weights it
     was built with (--export-weights, safetensors with PyTorch state_dict names) and its
     outputs (--export-output);
  2. builds the same architecture in plain PyTorch (no torchvision), loads those weights and
     checks its outputs against cgr's (fp32, TF32 off): a wrong architecture or weight name
     fails here;
  3. times batch-1 inference end to end (input copied in from pinned memory, outputs copied
     out, synchronised), as cgr-bench times its modes: torch eager, torch.cuda.graph replay and
     torch.compile(mode="reduce-overhead"), each with fp32 and with TF32.
With --cgr-json DIR (cgr-bench --export-json files DIR/<model>.json of the same run), it prints
every torch variant as a ratio to cgr's dag mode; it writes everything to --out as JSON.

Runs on the GPU machine's torch 2.x; --device cpu runs the check (and eager timing) with any
torch >= 1.13, which is how cgr's test suite checks the architectures on a machine without a
GPU. torch.compile variants come last and are skipped, said so, when --budget-s runs out.

    bench/torch_gpu_peer.py --cgr-bench build/gpu/bench/cgr-bench --work /tmp/peer \\
        --cgr-json $OUT/timings --out $OUT/torch_peer.json
"""
import argparse
import json
import math
import os
import statistics
import struct
import subprocess
import sys
import time

try:
    import numpy as np
    import torch
    from torch import nn
except ImportError as missing:  # the test suite reports this as skipped (exit 77)
    print(f"torch_gpu_peer.py: {missing}: run it with a python3 that has torch and numpy",
          file=sys.stderr)
    sys.exit(77)

MODELS = ["two-branch", "inception", "resnet18", "googlenet", "resnet18-exits"]


# ----------------------------------------------------------------------------- architectures
# Each mirrors cgr/models/src/<model>.cpp: the same layers, the same names.


class TwoBranch(nn.Module):
    """x -> conv1..conv3 (3x3, pad 1, bias, ReLU) and conv4..conv6; out = cat on channels."""

    def __init__(self, channels=3, width=32):
        super().__init__()
        for i in range(1, 7):
            setattr(self, f"conv{i}", nn.Conv2d(channels if i in (1, 4) else width, width, 3, padding=1))

    def forward(self, x):
        y = x
        for i in (1, 2, 3):
            y = torch.relu(getattr(self, f"conv{i}")(y))
        z = x
        for i in (4, 5, 6):
            z = torch.relu(getattr(self, f"conv{i}")(z))
        return {"out": torch.cat((y, z), dim=1)}


class BasicConv2d(nn.Module):
    """torchvision's BasicConv2d: conv (no bias) -> BatchNorm (eps 1e-3) -> ReLU."""

    def __init__(self, cin, cout, kernel, stride=1, padding=None):
        super().__init__()
        self.conv = nn.Conv2d(cin, cout, kernel, stride=stride,
                              padding=kernel // 2 if padding is None else padding, bias=False)
        self.bn = nn.BatchNorm2d(cout, eps=1e-3)

    def forward(self, x):
        return torch.relu(self.bn(self.conv(x)))


class Inception(nn.Module):
    def __init__(self, cin, ch1x1, ch3x3red, ch3x3, ch5x5red, ch5x5, pool_proj):
        super().__init__()
        self.branch1 = BasicConv2d(cin, ch1x1, 1)
        self.branch2 = nn.Sequential(BasicConv2d(cin, ch3x3red, 1), BasicConv2d(ch3x3red, ch3x3, 3))
        self.branch3 = nn.Sequential(BasicConv2d(cin, ch5x5red, 1), BasicConv2d(ch5x5red, ch5x5, 3))
        self.branch4 = nn.Sequential(nn.MaxPool2d(3, stride=1, padding=1, ceil_mode=True),
                                     BasicConv2d(cin, pool_proj, 1))

    def forward(self, x):
        return torch.cat([self.branch1(x), self.branch2(x), self.branch3(x), self.branch4(x)], 1)


class InceptionModule(nn.Module):
    """cgr's inception model: GoogLeNet's inception3a alone (1x192x28x28)."""

    def __init__(self):
        super().__init__()
        self.inception3a = Inception(192, 64, 96, 128, 16, 32, 32)

    def forward(self, x):
        return {"out": self.inception3a(x)}


class GoogLeNet(nn.Module):
    """torchvision's GoogLeNet without aux heads, dropout or input transform (as cgr builds it)."""

    def __init__(self, classes=1000):
        super().__init__()
        self.conv1 = BasicConv2d(3, 64, 7, stride=2, padding=3)
        self.maxpool1 = nn.MaxPool2d(3, stride=2, ceil_mode=True)
        self.conv2 = BasicConv2d(64, 64, 1)
        self.conv3 = BasicConv2d(64, 192, 3)
        self.maxpool2 = nn.MaxPool2d(3, stride=2, ceil_mode=True)
        self.inception3a = Inception(192, 64, 96, 128, 16, 32, 32)
        self.inception3b = Inception(256, 128, 128, 192, 32, 96, 64)
        self.maxpool3 = nn.MaxPool2d(3, stride=2, ceil_mode=True)
        self.inception4a = Inception(480, 192, 96, 208, 16, 48, 64)
        self.inception4b = Inception(512, 160, 112, 224, 24, 64, 64)
        self.inception4c = Inception(512, 128, 128, 256, 24, 64, 64)
        self.inception4d = Inception(512, 112, 144, 288, 32, 64, 64)
        self.inception4e = Inception(528, 256, 160, 320, 32, 128, 128)
        self.maxpool4 = nn.MaxPool2d(2, stride=2, ceil_mode=True)
        self.inception5a = Inception(832, 256, 160, 320, 32, 128, 128)
        self.inception5b = Inception(832, 384, 192, 384, 48, 128, 128)
        self.fc = nn.Linear(1024, classes)

    def forward(self, x):
        x = self.maxpool1(self.conv1(x))
        x = self.maxpool2(self.conv3(self.conv2(x)))
        x = self.maxpool3(self.inception3b(self.inception3a(x)))
        for name in ("inception4a", "inception4b", "inception4c", "inception4d", "inception4e"):
            x = getattr(self, name)(x)
        x = self.inception5b(self.inception5a(self.maxpool4(x)))
        x = torch.flatten(torch.mean(x, dim=(2, 3), keepdim=True), 1)
        return {"logits": self.fc(x)}


class BasicBlock(nn.Module):
    def __init__(self, cin, cout, stride):
        super().__init__()
        self.conv1 = nn.Conv2d(cin, cout, 3, stride=stride, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(cout)
        self.conv2 = nn.Conv2d(cout, cout, 3, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(cout)
        self.downsample = None
        if stride != 1 or cin != cout:
            self.downsample = nn.Sequential(nn.Conv2d(cin, cout, 1, stride=stride, bias=False),
                                            nn.BatchNorm2d(cout))

    def forward(self, x):
        out = self.bn2(self.conv2(torch.relu(self.bn1(self.conv1(x)))))
        return torch.relu(out + (x if self.downsample is None else self.downsample(x)))


class ExitHead(nn.Module):
    """cgr's exit head: conv 3x3 (-> 128, no bias) -> BN -> ReLU -> global avg pool -> fc."""

    def __init__(self, cin, classes):
        super().__init__()
        self.conv = nn.Conv2d(cin, 128, 3, padding=1, bias=False)
        self.bn = nn.BatchNorm2d(128)
        self.fc = nn.Linear(128, classes)

    def forward(self, x):
        h = torch.relu(self.bn(self.conv(x)))
        return self.fc(torch.flatten(torch.mean(h, dim=(2, 3), keepdim=True), 1))


class ResNet18(nn.Module):
    """torchvision's ResNet-18; with_exits adds cgr's three heads after layer1..layer3, computed
    in program order as a PyTorch forward does (cgr-bench --exits all)."""

    def __init__(self, classes=1000, with_exits=False):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 64, 7, stride=2, padding=3, bias=False)
        self.bn1 = nn.BatchNorm2d(64)
        self.maxpool = nn.MaxPool2d(3, stride=2, padding=1)
        cin = 64
        for i, (cout, stride) in enumerate([(64, 1), (128, 2), (256, 2), (512, 2)], start=1):
            setattr(self, f"layer{i}", nn.Sequential(BasicBlock(cin, cout, stride), BasicBlock(cout, cout, 1)))
            cin = cout
        self.fc = nn.Linear(512, classes)
        self.exits = nn.ModuleList([ExitHead(c, classes) for c in (64, 128, 256)]) if with_exits else None

    def forward(self, x):
        x = self.maxpool(torch.relu(self.bn1(self.conv1(x))))
        out = {}
        for i in range(1, 5):
            x = getattr(self, f"layer{i}")(x)
            if self.exits is not None and i <= 3:
                out[f"exit{i - 1}"] = self.exits[i - 1](x)
        out["final" if self.exits is not None else "logits"] = self.fc(
            torch.flatten(torch.mean(x, dim=(2, 3), keepdim=True), 1))
        return out


def make_model(name):
    return {
        "two-branch": lambda: TwoBranch(),
        "inception": lambda: InceptionModule(),
        "resnet18": lambda: ResNet18(),
        "googlenet": lambda: GoogLeNet(),
        "resnet18-exits": lambda: ResNet18(with_exits=True),
    }[name]()


# ----------------------------------------------------------------------------- files


def read_safetensors(path):
    """{name: torch.Tensor} of an f32/f16 safetensors file (no dependency on the package)."""
    with open(path, "rb") as f:
        data = f.read()
    (header_bytes,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8:8 + header_bytes])
    body = memoryview(data)[8 + header_bytes:]
    dtypes = {"F32": np.float32, "F16": np.float16}
    tensors = {}
    for name, entry in header.items():
        if name == "__metadata__":
            continue
        if entry["dtype"] not in dtypes:
            raise SystemExit(f"{path}: tensor '{name}' has dtype {entry['dtype']}, not F32 or F16")
        begin, end = entry["data_offsets"]
        array = np.frombuffer(body[begin:end], dtype=dtypes[entry["dtype"]]).reshape(entry["shape"])
        tensors[name] = torch.from_numpy(array.astype(np.float32))
    return tensors


def load_weights(model, path):
    state = read_safetensors(path)
    missing, unexpected = model.load_state_dict(state, strict=False)
    missing = [k for k in missing if not k.endswith("num_batches_tracked")]
    if missing or unexpected:
        raise SystemExit(f"{path}: the weights do not fit the torch model: missing {missing[:5]}, "
                         f"unexpected {unexpected[:5]}")


def run(command, what):
    done = subprocess.run(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    if done.returncode != 0:
        raise SystemExit(f"{what} failed (exit {done.returncode}):\n{done.stdout[-3000:]}")
    return done.stdout


# ----------------------------------------------------------------------------- timing


def set_tf32(enabled):
    torch.backends.cudnn.allow_tf32 = enabled
    torch.backends.cuda.matmul.allow_tf32 = enabled


class Timed:
    """One end-to-end inference: pinned input in, forward, outputs out, synchronised."""

    def __init__(self, forward, x, device):
        self.forward, self.device = forward, device
        self.x_host = x.pin_memory() if device == "cuda" else x
        self.x_dev = x.to(device)
        self.out_host = None

    def __call__(self):
        self.x_dev.copy_(self.x_host, non_blocking=True)
        out = self.forward(self.x_dev)
        if self.out_host is None:
            self.out_host = {k: torch.empty(v.shape, dtype=v.dtype,
                                            pin_memory=self.device == "cuda") for k, v in out.items()}
        for k, v in out.items():
            self.out_host[k].copy_(v, non_blocking=True)
        if self.device == "cuda":
            torch.cuda.synchronize()
        return self.out_host


def median_ms(step, iterations, duration_s):
    times = []
    stop = time.perf_counter() + duration_s
    while len(times) < iterations or (iterations == 0 and time.perf_counter() < stop):
        start = time.perf_counter()
        step()
        times.append((time.perf_counter() - start) * 1e3)
        if iterations == 0 and len(times) >= 100000:
            break
    return statistics.median(times), len(times)


def cuda_graph_forward(model, x_dev):
    """torch.cuda.graph capture of model(static input); replays write the static outputs."""
    static_x = x_dev.clone()
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(3):
            model(static_x)
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        static_out = model(static_x)

    def forward(x):
        static_x.copy_(x, non_blocking=True)
        graph.replay()
        return static_out

    return forward


# ----------------------------------------------------------------------------- main


def cgr_run(args, name, work):
    """Input, weights and outputs of one cgr-bench run on this model."""
    folder = os.path.join(work, name)
    os.makedirs(folder, exist_ok=True)
    info = os.path.join(folder, "info.json")
    run([args.cgr_bench, "--model", name, "--device", "cpu", "--info", "--export-json", info],
        f"cgr-bench --info on {name}")
    with open(info) as f:
        model_facts = json.load(f)["model"]
    (inp,) = model_facts["inputs"]
    rng = np.random.default_rng(2026)
    x = rng.uniform(-1.0, 1.0, size=inp["shape"]).astype(np.float32)
    x_path = os.path.join(folder, "input.npy")
    np.save(x_path, x)
    weights = os.path.join(folder, "weights.safetensors")
    outputs = os.path.join(folder, "cgr_outputs")
    command = [args.cgr_bench, "--model", name, "--device", args.device, "--mode", "dag",
               "--iterations", "1", "--warmup-ms", "0", "--load-input", x_path,
               "--export-weights", weights, "--export-output", outputs]
    if name == "resnet18-exits":
        command += ["--exits", "all"]
    run(command, f"cgr-bench on {name}")
    expected = {f[:-4]: np.load(os.path.join(outputs, f)) for f in sorted(os.listdir(outputs))
                if f.endswith(".npy")}
    return torch.from_numpy(x), weights, expected


def relative_error(actual, expected):
    diff = float(np.max(np.abs(actual.astype(np.float64) - expected.astype(np.float64))))
    return diff / max(float(np.max(np.abs(expected))), 1e-30)


def cgr_medians(cgr_json_dir, name):
    path = os.path.join(cgr_json_dir, f"{name}.json") if cgr_json_dir else None
    if not path or not os.path.exists(path):
        return {}
    with open(path) as f:
        report = json.load(f)
    return {m["mode"]: m["latency_ms"]["median"] for m in report["modes"]}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cgr-bench", required=True, help="the cgr-bench executable")
    parser.add_argument("--models", default=",".join(MODELS))
    parser.add_argument("--device", choices=["cuda", "cpu"], default="cuda")
    parser.add_argument("--work", default="/tmp/cgr-torch-peer", help="folder for inputs, weights, outputs")
    parser.add_argument("--out", help="write the results here as JSON")
    parser.add_argument("--cgr-json", help="folder of cgr-bench --export-json files, <model>.json")
    parser.add_argument("--duration-s", type=float, default=1.0, help="timed seconds per variant")
    parser.add_argument("--iterations", type=int, default=0, help="> 0: exactly this many per variant")
    parser.add_argument("--budget-s", type=float, default=math.inf,
                        help="stop starting torch.compile variants past this many seconds")
    parser.add_argument("--no-compile", action="store_true", help="skip torch.compile")
    parser.add_argument("--tolerance", type=float, default=1e-3,
                        help="largest relative error of torch's outputs against cgr's (fp32)")
    args = parser.parse_args()
    started = time.perf_counter()
    models = [m for m in args.models.split(",") if m]
    for m in models:
        if m not in MODELS:
            parser.error(f"--models: '{m}' is not one of {', '.join(MODELS)}")
    if args.device == "cuda" and not torch.cuda.is_available():
        raise SystemExit("torch sees no CUDA device (use --device cpu to check on the CPU)")
    device = args.device
    results = {"torch": torch.__version__, "device": device,
               "gpu": torch.cuda.get_device_name() if device == "cuda" else None, "models": {}}
    precisions = ["fp32", "tf32"] if device == "cuda" else ["fp32"]
    failures = []
    prepared = {}
    for name in models:
        x, weights, expected = cgr_run(args, name, args.work)
        model = make_model(name).eval()
        load_weights(model, weights)
        model = model.to(device)
        if device == "cuda":
            set_tf32(False)
        with torch.inference_mode():
            got = {k: v.float().cpu().numpy() for k, v in model(x.to(device)).items()}
        if set(got) != set(expected):
            raise SystemExit(f"{name}: torch outputs {sorted(got)}, cgr outputs {sorted(expected)}")
        errors = {k: relative_error(got[k], expected[k]) for k in expected}
        ok = all(e <= args.tolerance for e in errors.values())
        if not ok:
            failures.append(f"{name}: relative error {errors} > {args.tolerance}")
        results["models"][name] = {"check": {"relative_error": errors, "ok": ok}, "ms": {}, "notes": []}
        prepared[name] = (model, x)
        print(f"{name:15s} torch vs cgr: max relative error "
              f"{max(errors.values()):.2e} ({'ok' if ok else 'MISMATCH'})", flush=True)

    def time_variant(name, variant, forward):
        model, x = prepared[name]
        step = Timed(forward, x, device)
        with torch.inference_mode():
            step()  # warm
            ms, count = median_ms(step, args.iterations, args.duration_s)
        results["models"][name]["ms"][variant] = ms
        print(f"{name:15s} {variant:22s} {ms:9.3f} ms ({count} runs)", flush=True)

    # Cheap variants first, for every model; compiles last, while the budget lasts.
    for name in models:
        model, x = prepared[name]
        for precision in precisions:
            if device == "cuda":
                set_tf32(precision == "tf32")
            time_variant(name, f"eager {precision}", model)
            if device == "cuda":
                with torch.inference_mode():
                    forward = cuda_graph_forward(model, x.to(device))
                time_variant(name, f"cuda-graph {precision}", forward)
    can_compile = hasattr(torch, "compile") and not args.no_compile
    for precision in precisions:
        for name in models:
            if not can_compile:
                results["models"][name]["notes"].append(
                    "torch.compile: " + ("skipped (--no-compile)" if args.no_compile else
                                         f"unavailable in torch {torch.__version__}"))
                continue
            if time.perf_counter() - started > args.budget_s:
                note = f"compile {precision}: skipped, budget of {args.budget_s:.0f} s spent"
                results["models"][name]["notes"].append(note)
                print(f"{name:15s} {note}", flush=True)
                continue
            if device == "cuda":
                set_tf32(precision == "tf32")
            model, x = prepared[name]
            torch._dynamo.reset()
            compiled = torch.compile(model, mode="reduce-overhead")
            t0 = time.perf_counter()
            with torch.inference_mode():
                for _ in range(3):  # compile, record the CUDA graphs, replay
                    compiled(x.to(device))
            results["models"][name][f"compile_{precision}_s"] = time.perf_counter() - t0
            time_variant(name, f"compile {precision}", compiled)

    # The table: each torch variant against cgr's modes of the same run.
    print("\nmodel            cgr dag ms  stream-graph  eager |  torch variant           ms   /cgr dag")
    for name in models:
        cgr = cgr_medians(args.cgr_json, name)
        results["models"][name]["cgr_ms"] = cgr
        dag = cgr.get("dag")
        head = (f"{name:15s} {dag if dag else float('nan'):10.3f} {cgr.get('stream-graph', float('nan')):13.3f}"
                f" {cgr.get('eager', float('nan')):6.3f}")
        for i, (variant, ms) in enumerate(results["models"][name]["ms"].items()):
            ratio = f"{ms / dag:8.2f}x" if dag else "       -"
            print(f"{head if i == 0 else ' ' * len(head)} |  {variant:20s} {ms:8.3f} {ratio}")
        for note in results["models"][name]["notes"]:
            print(f"{' ' * len(head)} |  {note}")
    if args.out:
        with open(args.out, "w") as f:
            json.dump(results, f, indent=1)
    if failures:
        print("\n".join(["MISMATCH against cgr:"] + failures), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
