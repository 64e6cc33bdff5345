"""cgr.benchmark: cgr-bench's measurement and table from Python."""

import math

import pytest

import cgr


def check_sane(run, iterations):
    latency = run.latency
    assert latency.count == iterations == len(run.latency_ms)
    assert 0 < latency.min <= latency.median <= latency.max
    assert latency.min <= latency.mean <= latency.max
    assert latency.min == min(run.latency_ms) and latency.max == max(run.latency_ms)
    assert latency.mean == pytest.approx(sum(run.latency_ms) / iterations, rel=1e-12)
    assert latency.cv == pytest.approx(latency.stddev / latency.mean, rel=1e-12)
    ordered = sorted(run.latency_ms)
    assert latency.median == ordered[math.ceil(iterations / 2) - 1]  # p50, nearest rank
    for p, value in latency.percentiles.items():
        # nearest rank: the smallest value with at least p% of the values at or below it
        assert value == ordered[max(1, math.ceil(p / 100 * iterations)) - 1]
    assert list(latency.percentiles) == [90.0, 95.0, 99.0]
    assert run.throughput == pytest.approx(iterations * 1000 / sum(run.latency_ms), rel=1e-12)
    assert run.enqueue.count == iterations and run.gpu is None  # cpu: enqueue is the latency
    assert run.answered_by == "final"


def test_benchmark_of_an_engine(two_branch_engine, image, capsys):
    results = cgr.benchmark(two_branch_engine, image.numpy(), modes=["eager", "dag"],
                            iterations=25, warmup_ms=5)
    assert list(results) == ["dag", "eager"]  # dag first: the others are compared with it
    for mode, run in results.items():
        assert run.mode == mode and run.device == "cpu"
        check_sane(run, 25)
        assert run.ops_executed == two_branch_engine.info()["ops"]
        assert run.instantiate_ms > 0
    assert math.isnan(results["dag"].build_ms)  # built before the call
    assert results["eager"].build_ms > 0
    # dag and eager compute the same function bit for bit.
    assert results["dag"].max_abs_diff_vs_dag == 0.0
    assert results["eager"].max_abs_diff_vs_dag == 0.0
    printed = capsys.readouterr().out
    assert "=== Performance summary (25 iterations per mode; warm-up 5 ms; modes interleaved) ===" in printed
    assert "[dag]" in printed and "[eager]" in printed
    assert "=== Comparison (median latency, interleaved rounds) ===" in printed
    dag_line = next(l for l in printed.splitlines() if l.startswith("  dag  "))
    assert "1.00x" in dag_line


def test_benchmark_of_an_onnx_path(two_branch_onnx, image, capsys):
    results = cgr.benchmark(two_branch_onnx, {"image": image}, modes=["dag"], iterations=10,
                            warmup_ms=1, verbose=False, threads=1)
    run = results["dag"]
    check_sane(run, 10)
    assert run.build_ms > 0
    assert run.max_abs_diff_vs_dag is None  # one mode: nothing to compare
    assert capsys.readouterr().out == ""
    with pytest.raises(TypeError, match=r"engine options \(threads\) apply to an ONNX path"):
        cgr.benchmark(cgr.Engine.from_onnx(two_branch_onnx), image, threads=1)
    with pytest.raises(cgr.Error, match=r"unknown mode 'fast'"):
        cgr.benchmark(two_branch_onnx, image, modes=["fast"], iterations=1)


def test_benchmark_for_a_duration_times_at_least_ten_runs(two_branch_engine, image):
    results = cgr.benchmark(two_branch_engine, image, modes=["dag"], duration_s=0.001,
                            warmup_ms=1, verbose=False)
    run = results["dag"]
    assert run.latency.count >= 10  # cgr-bench's floor for a duration
    check_sane(run, run.latency.count)
