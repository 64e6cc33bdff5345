#!/usr/bin/python3
"""cgr's CPU executor against ONNX Runtime's CPU execution provider, side by side in one run.

    scripts/install-deps.sh --peers        # once: Debian's torch / torchvision / onnx, ORT
    bash bench/peers/cpu-vs-ort.sh [--threads 1,2] [--rounds 3] [--duration-s 2]

(cpu-vs-ort.sh builds cgr-bench, exports the models with export_models.py and runs this script
with Debian's python3 and ONNX Runtime on its path.) For each thread count and model, every
round runs cgr-bench (modes dag and eager, interleaved by cgr-bench itself) and then ONNX
Runtime's sequential and parallel executors on the same ONNX file and input, one after the
other; each engine's figure is the median over rounds of its median latency. ONNX Runtime gets
the same thread budget: intra-op threads = T, and in parallel mode inter-op threads = T too
(the caller's thread counts in both). Its session is created for each measurement and freed
before cgr-bench starts, so its spinning workers never compete with cgr for the cores.
The outputs are compared as well: max |cgr dag - ORT| / max |ORT| per model.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np

try:
    import onnxruntime as ort
except ImportError:
    # 77: the test suite's "skipped" (a machine without the peer).
    print("cpu_vs_ort.py: onnxruntime is not importable; run scripts/install-deps.sh --peers "
          "and put /opt/cgr/peers on PYTHONPATH (cpu-vs-ort.sh does)", file=sys.stderr)
    sys.exit(77)

MODELS = ["two-group", "resnet18", "googlenet", "mobilenet_v2", "inception_v3"]


def ort_latency_ms(onnx_path, x, threads, parallel, warmup_s, duration_s):
    """Median latency of one ONNX Runtime session and its output for x."""
    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    options.intra_op_num_threads = threads
    if parallel:
        options.execution_mode = ort.ExecutionMode.ORT_PARALLEL
        options.inter_op_num_threads = threads
    else:
        options.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    session = ort.InferenceSession(onnx_path, options, providers=["CPUExecutionProvider"])
    feeds = {session.get_inputs()[0].name: x}
    output = session.run(None, feeds)[0]
    deadline = time.perf_counter() + warmup_s
    while time.perf_counter() < deadline:
        session.run(None, feeds)
    times = []
    deadline = time.perf_counter() + duration_s
    while len(times) < 10 or time.perf_counter() < deadline:
        start = time.perf_counter()
        session.run(None, feeds)
        times.append((time.perf_counter() - start) * 1000.0)
        if len(times) >= 100000:
            break
    del session
    return statistics.median(times), output


def cgr_latency_ms(cgr_bench, onnx_path, input_path, threads, warmup_s, duration_s, work_dir):
    """Median latency of cgr-bench's dag and eager modes and dag's output."""
    report = os.path.join(work_dir, "report.json")
    outputs = os.path.join(work_dir, "outputs")
    command = [cgr_bench, "--model", onnx_path, "--device", "cpu", "--mode", "all",
               "--threads", str(threads), "--load-input", input_path,
               "--warmup-ms", str(int(warmup_s * 1000)), "--duration-s", str(duration_s),
               "--export-json", report, "--export-output", outputs]
    result = subprocess.run(command, capture_output=True, text=True)
    if result.returncode != 0:
        raise RuntimeError(f"{' '.join(command)} failed ({result.returncode}):\n"
                           f"{result.stdout}{result.stderr}")
    with open(report) as f:
        data = json.load(f)
    medians = {m["mode"]: m["latency_ms"]["median"] for m in data["modes"]}
    output = np.load(os.path.join(outputs, "output.npy"))
    return medians, output


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cgr-bench", required=True, help="path of the cgr-bench executable")
    parser.add_argument("--model-dir", required=True, help="export_models.py's output folder")
    parser.add_argument("--models", default=",".join(MODELS))
    parser.add_argument("--threads", default="1,2", help="thread counts, e.g. 1,2")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--warmup-s", type=float, default=0.5)
    parser.add_argument("--duration-s", type=float, default=2.0)
    parser.add_argument("--json", help="also write the figures as JSON to this file")
    parser.add_argument("--max-difference", type=float,
                        help="exit 1 when a model's max |cgr - ORT| / max |ORT| exceeds this")
    args = parser.parse_args()
    models = [m for m in args.models.split(",") if m]
    try:
        thread_counts = [int(t) for t in args.threads.split(",") if t]
    except ValueError:
        parser.error(f"--threads {args.threads!r}: expected comma-separated integers")
    if not thread_counts or min(thread_counts) < 1:
        parser.error("--threads: each count must be at least 1")
    if not 1 <= args.rounds <= 100:
        parser.error("--rounds must be in [1, 100]")
    for name in models:
        for suffix in (".onnx", ".input.npy"):
            if not os.path.exists(os.path.join(args.model_dir, name + suffix)):
                parser.error(f"{os.path.join(args.model_dir, name + suffix)} is missing "
                             "(export_models.py writes it)")

    samples = {}  # (threads, model, engine) -> per-round medians
    errors = {}
    with tempfile.TemporaryDirectory(prefix="cgr-peers-") as work_dir:
        for round_index in range(args.rounds):
            for threads in thread_counts:
                for name in models:
                    onnx_path = os.path.join(args.model_dir, name + ".onnx")
                    input_path = os.path.join(args.model_dir, name + ".input.npy")
                    x = np.load(input_path)
                    cgr, cgr_out = cgr_latency_ms(args.cgr_bench, onnx_path, input_path, threads,
                                                  args.warmup_s, args.duration_s, work_dir)
                    seq, ort_out = ort_latency_ms(onnx_path, x, threads, False, args.warmup_s,
                                                  args.duration_s)
                    par, _ = ort_latency_ms(onnx_path, x, threads, True, args.warmup_s,
                                            args.duration_s)
                    for engine, ms in (("cgr dag", cgr["dag"]), ("cgr eager", cgr["eager"]),
                                       ("ORT sequential", seq), ("ORT parallel", par)):
                        samples.setdefault((threads, name, engine), []).append(ms)
                    errors[name] = float(np.max(np.abs(cgr_out - ort_out)) /
                                         max(float(np.max(np.abs(ort_out))), 1e-30))
                    print(f"round {round_index + 1}/{args.rounds}, {threads} thread(s), {name}: "
                          f"cgr dag {cgr['dag']:.2f} ms, eager {cgr['eager']:.2f}, "
                          f"ORT seq {seq:.2f}, par {par:.2f}", file=sys.stderr, flush=True)

    print(f"cgr CPU executor vs ONNX Runtime {ort.__version__} (CPUExecutionProvider), batch 1; "
          f"median latency in ms, median of {args.rounds} rounds")
    figures = []
    for threads in thread_counts:
        print(f"\n{threads} thread(s)\n")
        print("| model | cgr dag | cgr eager | ORT sequential | ORT parallel "
              "| ORT seq / cgr dag | ORT par / cgr dag | max rel. diff |")
        print("|---|---|---|---|---|---|---|---|")
        for name in models:
            med = {e: statistics.median(samples[(threads, name, e)])
                   for e in ("cgr dag", "cgr eager", "ORT sequential", "ORT parallel")}
            seq_ratio = med["ORT sequential"] / med["cgr dag"]
            par_ratio = med["ORT parallel"] / med["cgr dag"]
            print(f"| {name} | {med['cgr dag']:.2f} | {med['cgr eager']:.2f} "
                  f"| {med['ORT sequential']:.2f} | {med['ORT parallel']:.2f} "
                  f"| {seq_ratio:.2f} | {par_ratio:.2f} | {errors[name]:.1e} |")
            figures.append({"threads": threads, "model": name, "median_ms": med,
                            "ort_sequential_over_cgr_dag": seq_ratio,
                            "ort_parallel_over_cgr_dag": par_ratio,
                            "max_relative_difference": errors[name]})
    print("\nA ratio above 1 means cgr's dag is faster.")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"onnxruntime": ort.__version__, "rounds": args.rounds,
                       "figures": figures}, f, indent=1)
    if args.max_difference is not None:
        worse = {name: e for name, e in errors.items() if not e <= args.max_difference}
        if worse:
            print("cpu_vs_ort.py: outputs differ from ONNX Runtime's by more than "
                  f"{args.max_difference:g}: " +
                  ", ".join(f"{name} {e:.2e}" for name, e in worse.items()), file=sys.stderr)
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
