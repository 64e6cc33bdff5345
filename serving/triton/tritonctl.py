#!/usr/bin/python3
"""Renders a Triton model repository for a cgr model and runs tritonserver on loopback.

    tritonctl.py render --model M.onnx --repository DIR [options]   the repository only
    tritonctl.py start --model M.onnx --out DIR [options]           render DIR/repository, start
                                                                    tritonserver, wait for ready
    tritonctl.py stop --out DIR                                     stop what start started

render writes DIR/<name>/config.pbtxt (from config.pbtxt.in) and DIR/<name>/1/ with model.py
and a copy of the ONNX model. It builds the model once with cgr (bucket 1) to learn its inputs,
outputs and exit heads, so a model cgr cannot import fails here, with cgr's message, and not
inside the server. start picks free loopback ports for HTTP and gRPC (metrics off), starts
the server in its own session (log in DIR/tritonserver.log), waits until the server and the
model are ready (bounded by --timeout), and writes DIR/server.json: pid, ports, URLs.
The cgr package must import in this interpreter (PYTHONPATH=<build>/python for a build tree);
its folder goes into the config, where model.py finds it.
"""
import argparse
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
DEFAULT_TRITON_HOME = "/opt/cgr/triton/server/pytriton/tritonserver"  # install-deps.sh --tests


class TritonError(Exception):
    """A failure of rendering or running the server, with a message naming the thing."""


def parse_buckets(text):
    try:
        buckets = sorted(int(b) for b in text.split(","))
    except ValueError:
        raise TritonError(f"--buckets {text!r}: a comma-separated list of batch sizes, e.g. 1,2,4,8")
    if not buckets or buckets[0] < 1 or len(set(buckets)) != len(buckets):
        raise TritonError(f"--buckets {text!r}: distinct batch sizes of at least 1")
    return buckets


def parse_exit_outputs(entries, exits_json):
    """[[output, speculate_until], ...] from --exit-output OUT[=SPEC] and --exits-json FILE."""
    pairs = []
    if exits_json:
        with open(exits_json) as f:
            description = json.load(f)
        if not isinstance(description.get("exits"), list):
            raise TritonError(f"{exits_json}: no 'exits' list of [output, speculate_until] pairs")
        pairs += [[str(a), str(b)] for a, b in description["exits"]]
    for entry in entries or ():
        output, _, speculate = entry.partition("=")
        if not output:
            raise TritonError(f"--exit-output {entry!r}: OUTPUT or OUTPUT=SPECULATE_UNTIL")
        pairs.append([output, speculate])
    return pairs


def parse_input_shapes(entries):
    shapes = {}
    for entry in entries or ():
        name, _, dims = entry.partition("=")
        try:
            shapes[name] = [int(d) for d in dims.split(",")]
        except ValueError:
            raise TritonError(f"--input-shape {entry!r}: NAME=D0,D1,... (the batch dim included)")
    return shapes


def _dims(shape):
    return ", ".join(str(d) for d in shape) if shape else "1"


def _tensor_entry(name, data_type, shape):
    return (f'  {{\n    name: "{name}"\n    data_type: {data_type}\n'
            f"    dims: [ {_dims(shape)} ]\n  }}")


def _parameter_entry(key, value):
    return f'  {{\n    key: "{key}"\n    value: {{ string_value: {json.dumps(str(value))} }}\n  }}'


def render(args):
    """Writes the repository; returns (repository, served model name)."""
    try:
        import cgr
    except ImportError as e:
        raise TritonError(f"cannot import the cgr package ({e}): put it on PYTHONPATH "
                          "(a build tree: PYTHONPATH=build/default/python)")
    model = os.path.abspath(args.model)
    if not os.path.isfile(model):
        raise TritonError(f"--model {args.model}: no such file")
    if not args.name.replace("_", "").replace("-", "").isalnum():
        raise TritonError(f"--name {args.name!r}: letters, digits, '_' and '-' only")
    buckets = parse_buckets(args.buckets)
    exit_outputs = parse_exit_outputs(args.exit_output, args.exits_json)
    input_shapes = parse_input_shapes(args.input_shape)
    if args.exits != "off" and not exit_outputs:
        raise TritonError(f"--exits {args.exits} needs the exit heads: --exit-output or --exits-json")
    if args.instances < 1:
        raise TritonError(f"--instances {args.instances}: at least 1")
    if args.threads < 0 or args.queue_delay_us < 0:
        raise TritonError("--threads and --queue-delay-us are not negative")
    try:
        gpus = [int(g) for g in args.gpus.split(",")] if args.gpus else []
    except ValueError:
        raise TritonError(f"--gpus {args.gpus!r}: GPU indices, e.g. 0,1")
    if gpus and args.kind != "gpu":
        raise TritonError("--gpus goes with --kind gpu")

    # What cgr makes of the model (bucket 1 is enough: every bucket has the same per-sample
    # shapes, which BucketedEngine checks).
    try:
        probe = cgr.BucketedEngine.from_onnx(model, buckets=[1], exits=args.exits,
                                             threshold=args.threshold, threads=1,
                                             input_shapes=input_shapes, exit_outputs=exit_outputs)
    except cgr.Error as e:
        raise TritonError(f"cgr cannot build {model}: {e}")
    inputs = [_tensor_entry(s.name, "TYPE_FP32", s.shape) for s in probe.inputs]
    network_outputs = [s for s in probe.outputs if s.name not in probe.exit_names]
    if probe.exit_names:
        if len(network_outputs) != 1:
            raise TritonError(
                f"{model}: with exit heads the network must have one output besides them (the "
                f"final logits); it has {[s.name for s in network_outputs]}")
        heads = {s.name: s.shape for s in probe.outputs if s.name in probe.exit_names}
        for name, shape in heads.items():
            if shape != network_outputs[0].shape:
                raise TritonError(
                    f"{model}: exit head {name} gives {list(shape)} per sample, the final output "
                    f"{network_outputs[0].name} {list(network_outputs[0].shape)}: the served "
                    "logits need one shape")
        outputs = [_tensor_entry("logits", "TYPE_FP32", network_outputs[0].shape),
                   _tensor_entry("answered_by", "TYPE_STRING", [1])]
        outputs += [_tensor_entry(f"{e}_confidence", "TYPE_FP32", [1]) for e in probe.exit_names]
    else:
        outputs = [_tensor_entry(s.name, "TYPE_FP32", s.shape) for s in network_outputs]

    package_root = os.path.dirname(os.path.dirname(os.path.abspath(cgr.__file__)))
    parameters = {
        "onnx_model": "model.onnx", "buckets": ",".join(map(str, buckets)), "mode": args.mode,
        "threads": args.threads, "exits": args.exits, "threshold": args.threshold,
        "exit_outputs": json.dumps(exit_outputs), "input_shapes": json.dumps(input_shapes),
        "cgr_python_path": package_root,
    }
    with open(os.path.join(HERE, "config.pbtxt.in")) as f:
        template = f.read()
    values = {
        "NAME": args.name, "MAX_BATCH_SIZE": str(max(buckets)),
        "PREFERRED_BATCH_SIZES": ", ".join(map(str, buckets)),
        "MAX_QUEUE_DELAY_US": str(args.queue_delay_us), "INSTANCE_COUNT": str(args.instances),
        "INSTANCE_KIND": "KIND_GPU" if args.kind == "gpu" else "KIND_CPU",
        "INSTANCE_GPUS": f"\n    gpus: [ {', '.join(map(str, gpus))} ]" if gpus else "",
        "INPUTS": ",\n".join(inputs), "OUTPUTS": ",\n".join(outputs),
        "PARAMETERS": ",\n".join(_parameter_entry(k, v) for k, v in parameters.items()),
    }
    for key, value in values.items():
        template = template.replace(f"@{key}@", value)
    if "@" in template.replace("@@", ""):
        raise TritonError("config.pbtxt.in has a placeholder render does not fill")

    repository = os.path.abspath(args.repository)
    folder = os.path.join(repository, args.name)
    if os.path.exists(folder):
        shutil.rmtree(folder)
    os.makedirs(os.path.join(folder, "1"))
    with open(os.path.join(folder, "config.pbtxt"), "w") as f:
        f.write(template)
    shutil.copyfile(os.path.join(HERE, "model.py"), os.path.join(folder, "1", "model.py"))
    shutil.copyfile(model, os.path.join(folder, "1", "model.onnx"))
    return repository, args.name


def free_ports(count):
    """Loopback ports nothing listens on now (the server may still lose one to a race: start
    retries with others)."""
    sockets, ports = [], []
    try:
        for _ in range(count):
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            s.bind(("127.0.0.1", 0))
            sockets.append(s)
            ports.append(s.getsockname()[1])
    finally:
        for s in sockets:
            s.close()
    return ports


def server_command(triton_home, repository, http_port, grpc_port):
    binary = os.path.join(triton_home, "bin", "tritonserver")
    stub = os.path.join(triton_home, "backends", "python", "triton_python_backend_stub")
    for path in (binary, stub):
        if not os.access(path, os.X_OK):
            raise TritonError(f"{path} is missing or not executable (scripts/install-deps.sh "
                              "--tests installs Triton into /opt/cgr/triton; or set --triton-home)")
    return [binary, "--model-repository", repository,
            "--backend-directory", os.path.join(triton_home, "backends"),
            "--http-address", "127.0.0.1", "--http-port", str(http_port),
            "--grpc-address", "127.0.0.1", "--grpc-port", str(grpc_port),
            "--allow-metrics", "false", "--strict-readiness", "true",
            "--exit-timeout-secs", "15", "--log-verbose", "0"]


def _ready(url):
    try:
        with urllib.request.urlopen(url, timeout=2) as response:
            return response.status == 200
    except (urllib.error.URLError, ConnectionError, OSError):
        return False


def _log_tail(path, lines=10):
    """Triton's error lines (a failed model load says why there) and the last lines of the
    log, without the status tables."""
    try:
        with open(path, errors="replace") as f:
            log = [line.rstrip("\n") for line in f]
    except OSError:
        return "(no log)"
    errors = [line for line in log if re.match(r"E\d{4} ", line) and "CudaDriverHelper" not in line]
    last = [line for line in log if line.strip() and not line.startswith(("+", "|"))][-lines:]
    shown = errors[:10] + (["..."] if errors else []) + [line for line in last if line not in errors]
    return "\n".join(shown)


def launch(triton_home, repository, model_name, log_path, timeout, preexec_fn=None, attempts=3):
    """Starts tritonserver in its own session on free loopback ports and waits until it and
    the model are ready. Returns (process, http_port, grpc_port). On failure the server is
    stopped and TritonError carries the log's tail."""
    deadline = time.monotonic() + timeout
    for attempt in range(1, attempts + 1):
        http_port, grpc_port = free_ports(2)
        command = server_command(triton_home, repository, http_port, grpc_port)
        with open(log_path, "w") as log:
            process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT,
                                       stdin=subprocess.DEVNULL, start_new_session=True,
                                       preexec_fn=preexec_fn)
        base = f"http://127.0.0.1:{http_port}/v2"
        while time.monotonic() < deadline:
            if process.poll() is not None:
                break
            if _ready(f"{base}/health/ready") and _ready(f"{base}/models/{model_name}/ready"):
                return process, http_port, grpc_port
            time.sleep(0.25)
        status = process.poll()
        stop(process)
        tail = _log_tail(log_path)
        if status is not None and "address already in use" in tail.lower() and attempt < attempts:
            continue  # lost a port to another process between choosing and binding: again
        if status is None:
            raise TritonError(f"tritonserver was not ready within {timeout:.0f} s (stopped it); "
                              f"the end of {log_path}:\n{tail}")
        raise TritonError(f"tritonserver exited with status {status} before it was ready; "
                          f"the end of {log_path}:\n{tail}")
    raise TritonError("unreachable")


def stop(process_or_pid, timeout=30):
    """SIGTERM to the server's process group (the server and its Python backend stubs), then
    SIGKILL after `timeout` seconds. Returns the server's exit status when it is our child."""
    process = process_or_pid if isinstance(process_or_pid, subprocess.Popen) else None
    pid = process.pid if process else int(process_or_pid)
    try:
        os.killpg(pid, signal.SIGTERM)
    except ProcessLookupError:
        return process.wait() if process else None
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process is not None:
            if process.poll() is not None:
                break
        elif not _alive(pid):
            break
        time.sleep(0.1)
    else:
        try:
            os.killpg(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    # The stubs leave when the server does; a straggler of the group goes too.
    try:
        os.killpg(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    return process.wait() if process else None


def _alive(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:  # a zombie is not alive
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(")")[-1].split()[0] != "Z"
    except OSError:
        return False


def add_render_options(parser):
    parser.add_argument("--model", required=True, help="the ONNX model")
    parser.add_argument("--name", default="cgr", help="the served model's name (default cgr)")
    parser.add_argument("--buckets", default="1,2,4,8",
                        help="batch buckets; max_batch_size is the largest (default 1,2,4,8)")
    parser.add_argument("--instances", type=int, default=2,
                        help="instances (processes, one cgr context each; default 2)")
    parser.add_argument("--kind", choices=["cpu", "gpu"], default="cpu",
                        help="instance kind: cpu (KIND_CPU, default) or gpu (KIND_GPU: CUDA engines)")
    parser.add_argument("--gpus", help="KIND_GPU: the GPUs, e.g. 0,1 (count instances on each)")
    parser.add_argument("--threads", type=int, default=1,
                        help="CPU threads per instance's engine (default 1; 0: all)")
    parser.add_argument("--mode", default="dag", help="executor mode (dag, eager, stream-graph)")
    parser.add_argument("--exits", choices=["off", "all", "early"], default="off")
    parser.add_argument("--threshold", type=float, default=0.9)
    parser.add_argument("--exit-output", action="append", metavar="OUTPUT[=SPECULATE_UNTIL]",
                        help="an ONNX output that is an exit head (repeat, in backbone order)")
    parser.add_argument("--exits-json", help="exit heads from a file {\"exits\": [[output, "
                        "speculate_until], ...]} (samples/resnet18_exits/export_onnx.py writes it)")
    parser.add_argument("--input-shape", action="append", metavar="NAME=D0,D1,...",
                        help="shape of an input with symbolic dims besides the batch")
    parser.add_argument("--queue-delay-us", type=int, default=500,
                        help="dynamic batching: longest wait for a fuller batch (default 500)")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    commands = parser.add_subparsers(dest="command", required=True)
    render_parser = commands.add_parser("render", help="write the model repository")
    add_render_options(render_parser)
    render_parser.add_argument("--repository", required=True)
    start_parser = commands.add_parser("start", help="render and start tritonserver on loopback")
    add_render_options(start_parser)
    start_parser.add_argument("--out", required=True,
                              help="folder for the repository, log, and server.json")
    start_parser.add_argument("--triton-home", default=os.environ.get("TRITON_HOME",
                                                                      DEFAULT_TRITON_HOME))
    start_parser.add_argument("--timeout", type=float, default=180,
                              help="seconds to wait for readiness (default 180)")
    stop_parser = commands.add_parser("stop", help="stop the server start started")
    stop_parser.add_argument("--out", required=True)
    args = parser.parse_args()

    try:
        if args.command == "render":
            repository, name = render(args)
            print(f"tritonctl: rendered model '{name}' into {repository}")
        elif args.command == "start":
            out = os.path.abspath(args.out)
            state = os.path.join(out, "server.json")
            if os.path.exists(state):
                with open(state) as f:
                    pid = json.load(f)["pid"]
                if _alive(pid):
                    raise TritonError(f"a server started here still runs (pid {pid}): "
                                      f"tritonctl.py stop --out {out}")
            os.makedirs(out, exist_ok=True)
            args.repository = os.path.join(out, "repository")
            repository, name = render(args)
            log_path = os.path.join(out, "tritonserver.log")
            process, http_port, grpc_port = launch(args.triton_home, repository, name, log_path,
                                                   args.timeout)
            info = {"pid": process.pid, "model": name, "repository": repository,
                    "log": log_path, "http": f"127.0.0.1:{http_port}",
                    "grpc": f"127.0.0.1:{grpc_port}"}
            with open(state, "w") as f:
                json.dump(info, f, indent=2)
            print(f"tritonctl: tritonserver (pid {process.pid}) serves model '{name}'\n"
                  f"  HTTP  http://127.0.0.1:{http_port}/v2/models/{name}\n"
                  f"  gRPC  127.0.0.1:{grpc_port}\n"
                  f"  log   {log_path}\n"
                  f"  stop  {os.path.join(HERE, 'serve.sh')} --stop {out}   (or: kill -TERM -{process.pid})")
        else:
            out = os.path.abspath(args.out)
            state = os.path.join(out, "server.json")
            if not os.path.exists(state):
                raise TritonError(f"{state}: no server was started with --out {out}")
            with open(state) as f:
                pid = json.load(f)["pid"]
            if _alive(pid):
                stop(pid)
                print(f"tritonctl: stopped tritonserver (pid {pid})")
            else:
                print(f"tritonctl: tritonserver (pid {pid}) was not running")
            os.remove(state)
    except TritonError as e:
        print(f"tritonctl.py {args.command}: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
