#!/usr/bin/python3
"""Load test of cgr on Triton Inference Server (serving/triton) with the exits sample.

    triton_load_test.py --model exits.onnx --digits-cache build/digits --work DIR
        [--requests 1200] [--clients 8] [--buckets 1,2,4,8] [--instances 2] [--threads 1]
        [--exits early|off] [--venv /opt/cgr/triton/venv] [--triton-home DIR] [--deadline 100]

Renders the model repository for the exits sample (exits.onnx and the exits.json next to it,
from samples/resnet18_exits/export_onnx.py: the digits model, policy early, threshold 0.9;
buckets 1,2,4,8 and two instances of one thread by default), starts tritonserver on free
loopback ports, and sends --requests requests from --clients concurrent clients over HTTP and
as many over gRPC (tritonclient), each of one to three held-out digit images (from
train_digits.py's cache).

Every row of every answer must equal local inference with the cgr package on that image
alone (cgr.Engine, batch 1, same policy and threshold): the same answered_by, and the logits
of the head that answered and each head's confidence within 1e-5 (relative to the largest
logit), NaN where the head did not run. With --exits off the model is served as any ONNX
model (its outputs exit0, exit1, exit2 and final as they are) and each must equal local
inference with exits off within 1e-5. Triton's statistics must count every image, in
batches no larger than the largest bucket and some larger than 1 (the dynamic batcher at
work). Prints throughput and p50/p99 latency per protocol.

The server runs in its own session and is stopped at the end, on failure too (and gets
SIGTERM if this process dies: PR_SET_PDEATHSIG). Exit 77 (skipped) only when a dependency is
missing: Triton or tritonclient (scripts/install-deps.sh --tests), or torch for the model
(CTest runs this only where the Python module was built; elsewhere it runs `--skipped
REASON`, which prints the reason and exits 77).
"""
import argparse
import ctypes
import json
import os
import signal
import subprocess
import sys
import threading
import time

SKIPPED = 77
HERE = os.path.dirname(os.path.abspath(__file__))
SOURCE = os.path.dirname(os.path.dirname(HERE))
DEFAULT_VENV = "/opt/cgr/triton/venv"


def skip(reason):
    print(f"triton_load_test skipped: {reason}")
    sys.exit(SKIPPED)


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", required=True, help="exits.onnx (exits.json next to it)")
    parser.add_argument("--digits-cache", required=True,
                        help="train_digits.py's --cache folder: the held-out images")
    parser.add_argument("--work", required=True, help="folder for the repository and the log")
    parser.add_argument("--requests", type=int, default=1200, help="requests in all (>= 1000)")
    parser.add_argument("--clients", type=int, default=8,
                        help="concurrent clients per protocol (HTTP and gRPC; >= 4 each)")
    parser.add_argument("--venv", default=DEFAULT_VENV, help="the venv with tritonclient")
    parser.add_argument("--triton-home", default=None, help="tritonserver's folder")
    parser.add_argument("--buckets", default="1,2,4,8",
                        help="batch buckets (max_batch_size: the largest; default 1,2,4,8)")
    parser.add_argument("--instances", type=int, default=2, help="Triton instances (default 2)")
    parser.add_argument("--threads", type=int, default=1, help="threads per instance (default 1)")
    parser.add_argument("--exits", choices=["early", "off"], default="early",
                        help="early: the heads as exits (answered_by, logits, confidences); "
                        "off: the model as a plain ONNX model, its four outputs served as they are")
    parser.add_argument("--deadline", type=float, default=100,
                        help="seconds for the whole test, server start included")
    return parser.parse_args()


def in_client_venv(venv):
    """Runs this script under the venv's interpreter (tritonclient and its protobuf live there,
    apart from Debian's onnx and protobuf)."""
    python = os.path.join(venv, "bin", "python")
    if os.path.realpath(sys.prefix) == os.path.realpath(venv):
        return
    if not os.access(python, os.X_OK):
        skip(f"no tritonclient venv at {venv} (scripts/install-deps.sh --tests makes it)")
    os.execv(python, [python, os.path.abspath(__file__)] + sys.argv[1:])


def die_with_parent():
    """In the server's process, before exec: SIGTERM when this test dies, however it dies."""
    libc = ctypes.CDLL("libc.so.6", use_errno=True)
    libc.prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG


def percentile(values, q):
    ordered = sorted(values)
    if not ordered:
        return float("nan")
    rank = max(0, min(len(ordered) - 1, int(round(q / 100.0 * len(ordered) + 0.5)) - 1))
    return ordered[rank]


def plan_requests(count, images, largest, seed=0):
    """count requests of 1 to 3 image indices (mostly 1; at most `largest`), fixed by the
    seed."""
    import numpy as np
    rng = np.random.default_rng(seed)
    sizes = np.minimum(rng.choice([1, 1, 1, 1, 2, 3], size=count), largest)
    return [rng.integers(0, images, size=n).tolist() for n in sizes]


class Reference:
    """Local inference with the cgr package, one image at a time (batch 1), cached per image.
    Policy early: (answered_by, the answering head's logits, {exit: confidence or NaN});
    policy off (the model as a plain ONNX model): {output: row}."""

    def __init__(self, cgr, model, exits, threshold, policy):
        self.policy = policy
        self.engine = cgr.Engine.from_onnx(
            model, exits=policy, threshold=threshold, threads=1,
            input_shapes={"image": [1, 3, 32, 32]},
            exit_outputs=[tuple(e) for e in exits] if policy != "off" else None)
        self.context = self.engine.create_context()
        self.cache = {}

    def __call__(self, index, image):
        if index not in self.cache:
            result = self.context.infer({"image": image[None]})
            if self.policy == "off":
                self.cache[index] = {name: value[0].copy() for name, value in result.outputs.items()}
            else:
                answered_by = result.answered_by
                logits = result.outputs["final" if answered_by == "final" else answered_by][0]
                confidence = {r.name: (r.confidence[0] if r.ran else float("nan"))
                              for r in result.exits}
                self.cache[index] = (answered_by, logits.copy(), confidence)
        return self.cache[index]


def main():
    if len(sys.argv) == 3 and sys.argv[1] == "--skipped":  # CTest, when the module is not built
        skip(sys.argv[2])
    args = parse_args()
    in_client_venv(args.venv)
    try:
        import numpy as np
    except ImportError:
        skip(f"{sys.executable} has no numpy (Debian: python3-numpy)")
    try:
        import tritonclient.grpc as grpcclient
        import tritonclient.http as httpclient
    except ImportError as e:
        skip(f"tritonclient does not import in {sys.executable} ({e}; scripts/install-deps.sh --tests)")
    try:
        import cgr
    except ImportError as e:  # CTest runs this only where the module was built
        print(f"triton_load_test: the cgr package does not import ({e}; PYTHONPATH "
              f"{os.environ.get('PYTHONPATH', '')!r})", file=sys.stderr)
        return 1
    sys.path.insert(0, os.path.join(SOURCE, "serving", "triton"))
    import tritonctl

    triton_home = args.triton_home or os.environ.get("TRITON_HOME", tritonctl.DEFAULT_TRITON_HOME)
    if not os.access(os.path.join(triton_home, "bin", "tritonserver"), os.X_OK):
        skip(f"no tritonserver in {triton_home} (scripts/install-deps.sh --tests installs it)")
    exits_json = os.path.splitext(args.model)[0] + ".json"
    if not os.path.isfile(args.model) or not os.path.isfile(exits_json):
        import importlib.util
        if importlib.util.find_spec("torch") is None:
            skip("the exits sample's ONNX model was not made: no torch (Debian: python3-torch)")
        print(f"triton_load_test: {args.model} or {exits_json} is missing (the fixture "
              "triton_exits_model makes them)", file=sys.stderr)
        return 1
    if args.requests < 1 or args.clients < 1:
        print("triton_load_test: at least 1 request and 1 client per protocol", file=sys.stderr)
        return 2
    with open(exits_json) as f:
        exits = json.load(f)["exits"]
    # train_digits.py names the folder of its version (Debian's interpreter: it imports torch).
    folder = subprocess.run(
        ["/usr/bin/python3", os.path.join(SOURCE, "samples", "resnet18_exits", "train_digits.py"),
         "--cache", args.digits_cache, "--where"], check=True, capture_output=True,
        text=True, env={k: v for k, v in os.environ.items() if k != "PYTHONPATH"}).stdout.strip()
    images_path = os.path.join(folder, "heldout_images.npy")
    images = np.load(images_path).astype(np.float32)
    if images.ndim != 4 or images.shape[1:] != (3, 32, 32):
        print(f"triton_load_test: {images_path} holds {images.shape}, not N x 3 x 32 x 32",
              file=sys.stderr)
        return 1
    start = time.monotonic()
    deadline = start + args.deadline
    threshold = 0.9
    name = "cgr_exits"
    os.makedirs(args.work, exist_ok=True)

    render_args = argparse.Namespace(
        model=args.model, name=name, buckets=args.buckets, instances=args.instances, kind="cpu",
        gpus=None, threads=args.threads, mode="dag", exits=args.exits, threshold=threshold,
        exit_output=None, exits_json=exits_json if args.exits != "off" else None, input_shape=None, queue_delay_us=500,
        repository=os.path.join(args.work, "repository"))
    repository, _ = tritonctl.render(render_args)
    log_path = os.path.join(args.work, "tritonserver.log")

    # A SIGTERM (ctest --stop-time, a CI runner) unwinds through the finally below.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit("triton_load_test: terminated"))
    server = None
    try:
        server, http_port, grpc_port = tritonctl.launch(
            triton_home, repository, name, log_path, timeout=max(10.0, deadline - time.monotonic() - 30),
            preexec_fn=die_with_parent)
        print(f"triton_load_test: tritonserver ready in {time.monotonic() - start:.1f} s "
              f"(HTTP 127.0.0.1:{http_port}, gRPC 127.0.0.1:{grpc_port}; log {log_path})",
              flush=True)
        status = run_load(args, np, httpclient, grpcclient, cgr, images, exits, threshold, name,
                          http_port, grpc_port, deadline)
    finally:
        if server is not None:
            code = tritonctl.stop(server)
            print(f"triton_load_test: tritonserver stopped (exit status {code})")
            if code != 0 and sys.exc_info()[0] is None:
                print(f"triton_load_test: tritonserver did not shut down cleanly; the end of "
                      f"{log_path}:\n{tritonctl._log_tail(log_path)}", file=sys.stderr)
                return 1
    print(f"triton_load_test: done in {time.monotonic() - start:.1f} s")
    return status


def run_load(args, np, httpclient, grpcclient, cgr, images, exits, threshold, name, http_port,
             grpc_port, deadline):
    import tritonctl
    if args.exits == "off":
        output_names = [e for e, _ in exits] + ["final"]
    else:
        output_names = ["logits", "answered_by"] + [f"{e}_confidence" for e, _ in exits]
    largest = max(tritonctl.parse_buckets(args.buckets))
    plans = plan_requests(args.requests, len(images), largest)
    clients = [("HTTP", k) for k in range(args.clients)] + [("gRPC", k) for k in range(args.clients)]
    # Request r goes to client r mod len(clients): both protocols carry the same mix.
    work = {c: [] for c in range(len(clients))}
    for r, plan in enumerate(plans):
        work[r % len(clients)].append((r, plan))
    answers = [None] * len(plans)
    latency = {"HTTP": [], "gRPC": []}
    errors = []
    lock = threading.Lock()
    barrier = threading.Barrier(len(clients) + 1)

    def client_thread(c):
        protocol, _ = clients[c]
        module = httpclient if protocol == "HTTP" else grpcclient
        try:
            if protocol == "HTTP":
                client = httpclient.InferenceServerClient(f"127.0.0.1:{http_port}",
                                                          connection_timeout=30, network_timeout=30)
            else:
                client = grpcclient.InferenceServerClient(f"127.0.0.1:{grpc_port}")
            outputs = [module.InferRequestedOutput(o) for o in output_names]
        except Exception as e:  # noqa: BLE001 - reported below, the test fails
            with lock:
                errors.append(f"{protocol} client {c}: {type(e).__name__}: {e}")
            barrier.wait()
            return
        barrier.wait()
        mine = []
        try:
            for r, plan in work[c]:
                if time.monotonic() > deadline:
                    raise TimeoutError(f"the test's deadline ({args.deadline:.0f} s) passed")
                batch = images[plan]
                request = module.InferInput("image", list(batch.shape), "FP32")
                request.set_data_from_numpy(batch)
                sent = time.perf_counter()
                if protocol == "HTTP":
                    result = client.infer(name, [request], outputs=outputs)
                else:
                    result = client.infer(name, [request], outputs=outputs, client_timeout=30)
                mine.append(time.perf_counter() - sent)
                answers[r] = (protocol, {o: result.as_numpy(o) for o in output_names})
        except Exception as e:  # noqa: BLE001
            with lock:
                errors.append(f"{protocol} client {c}, request {r}: {type(e).__name__}: {e}")
        finally:
            with lock:
                latency[protocol] += mine
            client.close()

    threads = [threading.Thread(target=client_thread, args=(c,), daemon=True)
               for c in range(len(clients))]
    for t in threads:
        t.start()
    barrier.wait()  # every client connected: the clock starts
    began = time.perf_counter()
    for t in threads:
        t.join(max(1.0, deadline - time.monotonic() + 5))
    elapsed = time.perf_counter() - began
    if any(t.is_alive() for t in threads):
        errors.append("clients still running past the deadline")
    if errors:
        print("triton_load_test: FAILED:\n  " + "\n  ".join(errors[:10]), file=sys.stderr)
        return 1

    # Every row against local inference on its image alone.
    reference = Reference(cgr, args.model, exits, threshold, args.exits)
    mismatches, near_threshold = [], 0
    answered = {}
    rows = 0
    for r, plan in enumerate(plans):
        protocol, got = answers[r]
        for row, index in enumerate(plan):
            rows += 1
            where = f"request {r} ({protocol}) row {row} (image {index})"
            if args.exits == "off":
                for output, want in reference(index, images[index]).items():
                    scale = max(float(np.abs(want).max()), 1e-30)
                    error = float(np.abs(got[output][row] - want).max()) / scale
                    if not error <= 1e-5:
                        mismatches.append(f"{where}: {output} differs by {error:.2e} (relative)")
                continue
            want_by, want_logits, want_confidence = reference(index, images[index])
            got_by = got["answered_by"][row][0].decode()
            answered[got_by] = answered.get(got_by, 0) + 1
            scale = max(float(np.abs(want_logits).max()), 1e-30)
            if got_by != want_by:
                if any(abs(c - threshold) <= 1e-5 for c in want_confidence.values()):
                    near_threshold += 1  # a confidence within rounding of the threshold
                    continue
                mismatches.append(f"{where}: answered_by {got_by}, locally {want_by}")
                continue
            error = float(np.abs(got["logits"][row] - want_logits).max()) / scale
            if not error <= 1e-5:
                mismatches.append(f"{where}: logits differ by {error:.2e} (relative)")
            for e, _ in exits:
                got_c, want_c = float(got[f"{e}_confidence"][row][0]), want_confidence[e]
                same = (np.isnan(got_c) and np.isnan(want_c)) or abs(got_c - want_c) <= 1e-5
                if not same:
                    mismatches.append(f"{where}: {e} confidence {got_c}, locally {want_c}")
    if mismatches:
        print(f"triton_load_test: FAILED: {len(mismatches)} answers differ from local inference:\n  "
              + "\n  ".join(mismatches[:20]), file=sys.stderr)
        return 1
    if near_threshold > rows // 100:
        print(f"triton_load_test: FAILED: {near_threshold} rows differ at a confidence within 1e-5 "
              "of the threshold: too many to be rounding", file=sys.stderr)
        return 1

    # Triton's own count: every image, and the dynamic batcher at work within the buckets.
    stats_client = httpclient.InferenceServerClient(f"127.0.0.1:{http_port}")
    stats = stats_client.get_inference_statistics(name)["model_stats"][0]
    stats_client.close()
    batches = {int(b["batch_size"]): int(b["compute_infer"]["count"]) for b in stats["batch_stats"]}
    if int(stats["inference_count"]) != rows:
        print(f"triton_load_test: FAILED: Triton counts {stats['inference_count']} inferences, "
              f"the clients sent {rows} images", file=sys.stderr)
        return 1
    if max(batches) > largest or (largest > 1 and not any(size > 1 for size in batches)):
        print(f"triton_load_test: FAILED: batch sizes {sorted(batches.items())}: expected some "
              f"batches of 2 to {largest} and none larger", file=sys.stderr)
        return 1

    every = latency["HTTP"] + latency["gRPC"]
    print(f"triton_load_test: exits {args.exits}, buckets {args.buckets}, {args.instances} "
          f"instances x {args.threads} threads, {os.cpu_count()} cores")
    print(f"triton_load_test: {len(plans)} requests ({rows} images) from {len(clients)} concurrent "
          f"clients ({args.clients} HTTP, {args.clients} gRPC) in {elapsed:.2f} s: "
          f"{len(plans) / elapsed:.1f} requests/s, {rows / elapsed:.1f} images/s")
    print("  latency per request (ms)    p50      p99     mean  requests")
    for label, values in (("HTTP", latency["HTTP"]), ("gRPC", latency["gRPC"]), ("all", every)):
        print(f"  {label:<22} {1e3 * percentile(values, 50):8.2f} {1e3 * percentile(values, 99):8.2f} "
              f"{1e3 * sum(values) / len(values):8.2f}  {len(values):8d}")
    print(f"  Triton batches (size: count): "
          + ", ".join(f"{s}: {n}" for s, n in sorted(batches.items()))
          + f"; {int(stats['execution_count'])} executions for {rows} images")
    if args.exits == "off":
        print(f"  answers: all {rows} rows equal to local cgr inference on the image alone "
              f"({', '.join(output_names)} within 1e-5)")
    else:
        print(f"  answers: all {rows} rows equal to local cgr inference on the image alone "
              f"(answered_by; logits and confidences within 1e-5); answered by "
              + ", ".join(f"{k} {answered.get(k, 0)}" for k in [e for e, _ in exits] + ["final"])
              + (f"; {near_threshold} at a confidence within 1e-5 of the threshold"
                 if near_threshold else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
