#!/usr/bin/python3
"""Where the time goes: cgr's CPU ops against ONNX Runtime's nodes, one model, one thread count.

    PYTHONPATH=/opt/cgr/peers /usr/bin/python3 bench/peers/ops_vs_ort.py \\
        --cgr-bench build/default/bench/cgr-bench --model-dir build/peers --model mobilenet_v2 \\
        --threads 2 [--rounds 3] [--top 25] [--json FILE]

cgr: `cgr-bench --mode eager --export-profile` (one op at a time, like ORT's sequential
executor), each op's median over --profile-runs inferences; ORT: a sequential session with
profiling on, each node's median kernel time over as many runs after a warm-up. Each figure is
the minimum over --rounds rounds (the machine's noise only ever adds time), the two engines
alternating. An op is matched to the ORT nodes named after its fused layers or their outputs
(ORT names its fused NCHWc nodes "/<layer>_output_0_nchwc"); ORT's layout reorders and nodes
no op claims are listed as unmatched. The table lists the ops
where cgr is furthest behind, then sums per layer kind. cpu_vs_ort.py gives the end-to-end
figures; this script says which ops make them.
"""
import argparse
import collections
import json
import os
import statistics
import subprocess
import sys
import tempfile

import numpy as np

try:
    import onnxruntime as ort
except ImportError:
    print("ops_vs_ort.py: onnxruntime is not importable; run scripts/install-deps.sh --peers "
          "and put /opt/cgr/peers on PYTHONPATH", file=sys.stderr)
    sys.exit(77)


def cgr_op_times(cgr_bench, onnx_path, input_path, threads, runs, work_dir):
    """{op: (median ms, kind)} of one cgr-bench eager profile."""
    profile = os.path.join(work_dir, "profile.json")
    command = [cgr_bench, "--model", onnx_path, "--device", "cpu", "--mode", "eager",
               "--threads", str(threads), "--load-input", input_path, "--iterations", "3",
               "--warmup-ms", "100", "--export-profile", profile, "--profile-runs", str(runs)]
    result = subprocess.run(command, capture_output=True, text=True)
    if result.returncode != 0:
        raise RuntimeError(f"{' '.join(command)} failed ({result.returncode}):\n"
                           f"{result.stdout}{result.stderr}")
    with open(profile) as f:
        return {op["op"]: (op["median_ms"], op["kind"]) for op in json.load(f)["ops"]}


def ort_node_times(onnx_path, x, threads, runs, work_dir):
    """{node name: (median ms, op type)} of one profiled ORT sequential session."""
    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    options.intra_op_num_threads = threads
    options.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    options.enable_profiling = True
    options.profile_file_prefix = os.path.join(work_dir, "ort_profile")
    session = ort.InferenceSession(onnx_path, options, providers=["CPUExecutionProvider"])
    feeds = {session.get_inputs()[0].name: x}
    for _ in range(runs + 10):  # the first ten: warm-up, dropped below
        session.run(None, feeds)
    path = session.end_profiling()
    with open(path) as f:
        events = json.load(f)
    os.remove(path)
    times = collections.defaultdict(list)
    kinds = {}
    for event in events:
        name = event.get("name", "")
        if event.get("cat") == "Node" and name.endswith("_kernel_time"):
            node = name[:-len("_kernel_time")]
            times[node].append(event["dur"] / 1000.0)
            kinds[node] = event.get("args", {}).get("op_name", "?")
    return {node: (statistics.median(t[-runs:]), kinds[node]) for node, t in times.items()}


def ort_key(node):
    """ORT's node name as the layer name it stands for."""
    node = node.lstrip("/")
    for suffix in ("_output_0_nchwc", "_output_0"):
        if node.endswith(suffix):
            return node[:-len(suffix)]
    return node


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cgr-bench", required=True, help="path of the cgr-bench executable")
    parser.add_argument("--model-dir", required=True, help="export_models.py's output folder")
    parser.add_argument("--model", required=True, help="e.g. mobilenet_v2")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--profile-runs", type=int, default=30)
    parser.add_argument("--top", type=int, default=25, help="ops listed (furthest behind first)")
    parser.add_argument("--json", help="also write every op's figures as JSON to this file")
    parser.add_argument("--min-matched", type=float,
                        help="exit 1 when fewer than this share of cgr's ops match an ORT node")
    args = parser.parse_args()
    if args.threads < 1:
        parser.error("--threads must be at least 1")
    if not 1 <= args.rounds <= 100:
        parser.error("--rounds must be in [1, 100]")
    if not 1 <= args.profile_runs <= 10000:
        parser.error("--profile-runs must be in [1, 10000]")
    onnx_path = os.path.join(args.model_dir, args.model + ".onnx")
    input_path = os.path.join(args.model_dir, args.model + ".input.npy")
    for path in (onnx_path, input_path):
        if not os.path.exists(path):
            parser.error(f"{path} is missing (export_models.py writes it)")
    x = np.load(input_path)

    cgr, ort_nodes = {}, {}
    with tempfile.TemporaryDirectory(prefix="cgr-ops-") as work_dir:
        for _ in range(args.rounds):
            for op, (ms, kind) in cgr_op_times(args.cgr_bench, onnx_path, input_path,
                                               args.threads, args.profile_runs, work_dir).items():
                cgr[op] = (min(ms, cgr.get(op, (ms,))[0]), kind)
            for node, (ms, kind) in ort_node_times(onnx_path, x, args.threads, args.profile_runs,
                                                   work_dir).items():
                ort_nodes[node] = (min(ms, ort_nodes.get(node, (ms,))[0]), kind)

    # An op takes every ORT node named after one of its fused layers: by the full name, or
    # else a node whose path holds the layer's name as one component ("classifier.1" in
    # "/classifier/classifier.1/Gemm"), where only one does.
    by_key = {ort_key(node): node for node in ort_nodes}
    by_component = collections.defaultdict(list)
    for node in ort_nodes:
        for component in set(ort_key(node).split("/")):
            by_component[component].append(node)
    claimed = set()
    matched = {}  # cgr op -> its ORT nodes
    for op in cgr:
        nodes = []
        for layer in op.split("+"):
            node = by_key.get(layer)
            if node is None and len(by_component.get(layer, [])) == 1:
                node = by_component[layer][0]
            if node is not None and node not in claimed:
                claimed.add(node)
                nodes.append(node)
        matched[op] = nodes
    rows = []
    for op, (ms, kind) in cgr.items():
        nodes = matched[op]
        rows.append({"op": op, "kind": kind, "cgr_ms": ms, "ort_nodes": nodes,
                     "ort_ms": sum(ort_nodes[n][0] for n in nodes) if nodes else None})
    rows.sort(key=lambda r: -(r["cgr_ms"] - (r["ort_ms"] or 0.0)))
    cgr_total = sum(ms for ms, _ in cgr.values())
    ort_total = sum(ms for ms, _ in ort_nodes.values())
    print(f"{args.model}, {args.threads} thread(s): sum of per-op times (minimum over "
          f"{args.rounds} rounds of the median of {args.profile_runs} inferences)")
    print(f"  cgr (eager) {cgr_total:.3f} ms over {len(cgr)} ops; ONNX Runtime {ort.__version__} "
          f"(sequential) {ort_total:.3f} ms over {len(ort_nodes)} nodes, "
          f"{sum(ort_nodes[n][0] for n in claimed):.3f} ms of them matched to cgr ops")
    print(f"\nops furthest behind ONNX Runtime (cgr - ORT):\n")
    print("| cgr ms | ORT ms | cgr - ORT | kind | op |")
    print("|---:|---:|---:|---|---|")
    for r in rows[:args.top]:
        ort_ms = f"{r['ort_ms']:.3f}" if r["ort_ms"] is not None else "-"
        print(f"| {r['cgr_ms']:.3f} | {ort_ms} | {r['cgr_ms'] - (r['ort_ms'] or 0.0):+.3f} "
              f"| {r['kind']} | {r['op'].split('+')[0]} |")
    print("\nper cgr layer kind (ORT: the matched nodes):\n")
    print("| kind | ops | cgr ms | ORT ms |")
    print("|---|---:|---:|---:|")
    kinds = collections.defaultdict(lambda: [0, 0.0, 0.0])
    for r in rows:
        k = kinds[r["kind"]]
        k[0] += 1
        k[1] += r["cgr_ms"]
        k[2] += r["ort_ms"] or 0.0
    for kind, (count, cgr_ms, ort_ms) in sorted(kinds.items(), key=lambda kv: -kv[1][1]):
        print(f"| {kind} | {count} | {cgr_ms:.3f} | {ort_ms:.3f} |")
    unmatched = sorted((n for n in ort_nodes if n not in claimed),
                       key=lambda n: -ort_nodes[n][0])
    if unmatched:
        print(f"\nORT nodes no cgr op matched ({len(unmatched)}, "
              f"{sum(ort_nodes[n][0] for n in unmatched):.3f} ms): " +
              ", ".join(f"{n} ({ort_nodes[n][1]}, {ort_nodes[n][0]:.3f})" for n in unmatched[:8]) +
              (", ..." if len(unmatched) > 8 else ""))
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"model": args.model, "threads": args.threads, "rounds": args.rounds,
                       "onnxruntime": ort.__version__, "ops": rows,
                       "ort_unmatched": {n: ort_nodes[n][0] for n in unmatched}}, f, indent=1)
    share = sum(1 for r in rows if r["ort_nodes"]) / max(len(rows), 1)
    if args.min_matched is not None and share < args.min_matched:
        print(f"ops_vs_ort.py: {share:.0%} of cgr's ops matched an ONNX Runtime node, fewer than "
              f"--min-matched {args.min_matched:g}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
