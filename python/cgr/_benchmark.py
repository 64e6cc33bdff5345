"""cgr.benchmark: cgr-bench's replay measurement from Python.

The timing is cgr-bench's own code (bench/measure.cpp, compiled into the module): one engine
and context per mode, the inputs written into the context's buffers once, a warm-up, then
timed rounds with one ExecutionContext::run() of each mode per round (the first mode
rotating), and one inference per mode compared with dag's. The figures are cgr-bench's
(`cgr-bench --help` defines them):

  latency      wall-clock time of one run() with the inputs already in place (ms)
  pN           nearest-rank percentile: the smallest latency with at least N% of the
               iterations at or below it; the median is p50
  throughput   timed iterations / the sum of their latencies (inferences/s, back to back)
  enqueue      host time until the work is enqueued (= latency on the cpu)
  gpu          device time between events around the work, copies included (cuda)
  stability    coefficient of variation, stddev / mean of the latency (noisy above 2%)
  vs dag       a mode's median latency / dag's
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, field
from typing import Any, Dict, List, Mapping, Optional, Sequence, Union

from . import _cgr
from ._engine import Engine, _prepare

__all__ = ["benchmark", "ModeBenchmark", "Stats"]

_STABLE_CV = 0.02  # cgr-bench's stability threshold


@dataclass
class Stats:
    """Summary of a series of times in milliseconds (cgr::bench::Stats)."""

    count: int
    min: float
    mean: float
    median: float
    max: float
    stddev: float
    cv: float
    percentiles: Dict[float, float] = field(default_factory=dict)


@dataclass
class ModeBenchmark:
    """One mode's measurement."""

    mode: str
    device: str
    latency: Stats
    throughput: float  # inferences/s
    enqueue: Stats
    gpu: Optional[Stats]  # cuda only
    ops_executed: int
    answered_by: str
    max_abs_diff_vs_dag: Optional[float]  # None when dag was not measured
    build_ms: float  # import and Engine::build; NaN for an engine built before the call
    instantiate_ms: float  # Engine::create_context
    latency_ms: List[float]  # every timed iteration


def _stats(d: Mapping[str, Any]) -> Stats:
    return Stats(
        count=d["count"],
        min=d["min"],
        mean=d["mean"],
        median=d["median"],
        max=d["max"],
        stddev=d["stddev"],
        cv=d["cv"],
        percentiles=dict(d["percentiles"]),
    )


def _percentile_key(p: float) -> str:
    # fmt's "p{}" of a double: p90, p99.9
    return f"p{p:g}"


def _stats_line(s: Stats) -> str:
    line = f"min {s.min:.4f}  mean {s.mean:.4f}  median {s.median:.4f}"
    for p, v in s.percentiles.items():
        line += f"  {_percentile_key(p)} {v:.4f}"
    return line + f"  max {s.max:.4f} ms"


def _print_report(runs: List[ModeBenchmark], rule: str, warmup_ms: float, batch: int) -> None:
    """cgr-bench's performance summary and side-by-side comparison (bench/report.cpp)."""
    print(f"=== Performance summary ({rule}; warm-up {warmup_ms:g} ms; modes interleaved) ===")
    unstable = False
    for run in runs:
        print(f"[{run.mode}]")
        print(f"  iterations     {run.latency.count}")
        print(f"  latency        {_stats_line(run.latency)}")
        print(
            f"  throughput     {run.throughput:.1f} inferences/s "
            f"({run.throughput * batch:.1f} samples/s at batch {batch})"
        )
        if run.device == "cpu":
            print(
                "  host enqueue   = latency on cpu (the calling thread runs ops until the "
                "inference is done)"
            )
            print("  GPU compute    n/a on cpu")
        else:
            print(f"  host enqueue   {_stats_line(run.enqueue)}")
            if run.gpu is not None:
                print(f"  GPU compute    {_stats_line(run.gpu)} (copies included)")
        if run.latency.cv > _STABLE_CV:
            unstable = True
            print(
                f"  stability      WARNING: CV {100 * run.latency.cv:.2f}% > 2% (stddev "
                f"{run.latency.stddev:.4f} ms): noisy; other load, frequency scaling or too few "
                "iterations"
            )
        else:
            print(
                f"  stability      CV {100 * run.latency.cv:.2f}% (stddev "
                f"{run.latency.stddev:.4f} ms): stable"
            )
        print(f"  ops executed   {run.ops_executed} (answered by {run.answered_by})")
    dag = next((r for r in runs if r.mode == "dag"), None)
    if len(runs) > 1 and dag is not None:
        print("=== Comparison (median latency, interleaved rounds) ===")
        print(f"  {'mode':<14} {'median ms':>11}  {'vs dag':>8}  outputs vs dag (max |diff|)")
        for run in runs:
            diff = "-" if run.max_abs_diff_vs_dag is None else f"{run.max_abs_diff_vs_dag:.3g}"
            print(
                f"  {run.mode:<14} {run.latency.median:>11.4f}  "
                f"{run.latency.median / dag.latency.median:>7.2f}x  {diff}"
            )
        if unstable:
            print(
                "  (some modes were unstable: rerun with more iterations or on an idle machine)"
            )


def benchmark(
    engine_or_path: Union[Engine, str, os.PathLike],
    inputs: Any,
    modes: Optional[Sequence[str]] = None,
    iterations: int = 100,
    warmup_ms: float = 200,
    duration_s: Optional[float] = None,
    percentiles: Sequence[float] = (90, 95, 99),
    verbose: bool = True,
    **engine_options: Any,
) -> Dict[str, ModeBenchmark]:
    """Times an engine in several executor modes side by side, as cgr-bench does.

    engine_or_path: an Engine (its model is built again for each other mode, with its options)
        or an ONNX path (built with engine_options: device, exits, threshold, threads,
        input_shapes, exit_outputs).
    inputs: {input name: array} or one array for an engine with one input (NumPy or CPU torch).
    modes: executor modes; default every mode of the device (cpu: dag, eager; cuda: dag,
        stream-graph, eager). dag is measured first when present (the others are compared
        with it).
    iterations: timed runs per mode (ignored when duration_s is given: timed rounds until
        that many seconds have passed, at least 10 per mode). warmup_ms: warm-up time before
        timing, at least one run of each mode.
    verbose: print cgr-bench's performance summary and comparison table.
    Returns {mode: ModeBenchmark}.
    """
    if isinstance(engine_or_path, Engine):
        if engine_options:
            raise TypeError(
                "benchmark: engine options ("
                + ", ".join(sorted(engine_options))
                + ") apply to an ONNX path; this engine is already built"
            )
        base = engine_or_path
        base_build_ms = float("nan")  # built before this call
    else:
        started = time.perf_counter()
        base = Engine.from_onnx(engine_or_path, **engine_options)
        base_build_ms = (time.perf_counter() - started) * 1000
    if modes is None:
        modes = ["dag", "stream-graph", "eager"] if base.device == "cuda" else ["dag", "eager"]
    modes = list(dict.fromkeys(modes))  # once each, in order
    if "dag" in modes:
        modes.remove("dag")
        modes.insert(0, "dag")

    engines: List[Engine] = []
    build_ms: List[float] = []
    for mode in modes:
        if mode == base.mode:
            engines.append(base)
            build_ms.append(base_build_ms)
            continue
        started = time.perf_counter()
        engines.append(base._rebuilt(mode=mode))
        build_ms.append((time.perf_counter() - started) * 1000)

    if not isinstance(inputs, Mapping):
        if len(base.inputs) != 1:
            raise _cgr.Error(
                f"this engine has {len(base.inputs)} inputs ({base._input_list()}): pass "
                "benchmark a {name: array} mapping"
            )
        inputs = {base.inputs[0].name: inputs}
    prepared = []
    for name, value in inputs.items():
        array, _, is_cuda = _prepare(name, value)
        if is_cuda:
            array = array.cpu()  # written into each context's input buffers once, before timing
        prepared.append((name, array))

    iterations_rule = 0 if duration_s is not None else int(iterations)
    if iterations_rule <= 0 and duration_s is None:
        raise ValueError(f"benchmark: iterations must be positive, got {iterations}")
    raw = _cgr.measure(
        [e._native for e in engines],
        prepared,
        iterations_rule,
        float(warmup_ms),
        float(duration_s or 0),
        [float(p) for p in percentiles],
    )
    results: Dict[str, ModeBenchmark] = {}
    for k, r in enumerate(raw):
        results[r["mode"]] = ModeBenchmark(
            mode=r["mode"],
            device=r["device"],
            latency=_stats(r["latency"]),
            throughput=r["throughput"],
            enqueue=_stats(r["enqueue"]),
            gpu=_stats(r["gpu"]) if "gpu" in r else None,
            ops_executed=r["ops_executed"],
            answered_by=r["answered_by"],
            max_abs_diff_vs_dag=r.get("max_abs_diff_vs_dag"),
            build_ms=build_ms[k],
            instantiate_ms=r["instantiate_ms"],
            latency_ms=list(r["latency_ms"]),
        )
    if verbose:
        rule = (
            f"{duration_s:g} s of timed rounds"
            if duration_s is not None
            else f"{iterations_rule} iterations per mode"
        )
        first_shape = base.inputs[0].shape if base.inputs else ()
        batch = first_shape[0] if first_shape else 1
        _print_report(list(results.values()), rule, warmup_ms, batch)
    return results
