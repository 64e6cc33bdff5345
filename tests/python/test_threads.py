"""One context per thread: contexts of one engine share its weights and infer in parallel,
each giving exactly what a single thread gives; the GIL is released while they run."""

import sys
import threading
import time

import numpy as np
import torch
import torch.nn as nn

import cgr


def test_threads_with_their_own_contexts_agree_with_one_thread(two_branch_engine):
    generator = np.random.default_rng(11)
    images = [generator.standard_normal((1, 3, 16, 16)).astype(np.float32) for _ in range(8)]
    reference_ctx = two_branch_engine.create_context()
    expected = [reference_ctx(x)["output"] for x in images]
    failures, results = [], {}

    def worker(index):
        try:
            ctx = two_branch_engine.create_context()
            got = [ctx(images[(index + k) % len(images)])["output"] for k in range(40)]
            results[index] = got
        except Exception as error:  # reported by the main thread
            failures.append(error)

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert failures == []
    for index, got in results.items():
        for k, output in enumerate(got):
            np.testing.assert_array_equal(output, expected[(index + k) % len(images)])


def test_engine_call_uses_a_context_per_thread(two_branch_engine, image):
    contexts = []

    def worker():
        two_branch_engine(image)
        contexts.append(two_branch_engine._thread_context())

    threads = [threading.Thread(target=worker) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len({id(c) for c in contexts}) == 3


def test_inference_releases_the_gil():
    # A worker thread runs inferences of some tens of milliseconds and notes when each call
    # into the engine began and ended; this thread notes the time of each of its loop turns.
    # Were the GIL held inside the engine, no turn could fall well inside a call (only near its
    # ends, where the worker runs Python and may be switched out, every switch interval).
    torch.manual_seed(4)
    model = nn.Sequential(*[nn.Conv2d(32, 32, 3, padding=1) for _ in range(8)]).eval()
    engine = cgr.compile(model, torch.randn(1, 32, 128, 128), threads=1)
    x = np.random.default_rng(1).standard_normal((1, 32, 128, 128)).astype(np.float32)
    native = engine.create_context()._native
    calls, turns = [], []
    finished = threading.Event()

    def worker():
        for _ in range(3):
            began = time.perf_counter()
            native.infer([("input", x)])
            calls.append((began, time.perf_counter()))
        finished.set()

    switch_interval = sys.getswitchinterval()
    sys.setswitchinterval(0.001)
    try:
        thread = threading.Thread(target=worker)
        thread.start()
        while not finished.is_set():
            turns.append(time.perf_counter())
        thread.join()
    finally:
        sys.setswitchinterval(switch_interval)
    margin = 0.004  # seconds: four switch intervals at either end of a call
    assert all(end - began > 4 * margin for began, end in calls), calls
    inside = sum(1 for t in turns for began, end in calls if began + margin < t < end - margin)
    assert inside > 1000, f"{inside} of {len(turns)} loop turns fell well inside an inference"


def test_one_context_refuses_a_second_thread(two_branch_engine):
    # Two threads hammer one context: every call either succeeds with the right answer or is
    # refused with the message (never a corrupted result).
    ctx = two_branch_engine.create_context()
    x = np.ones((1, 3, 16, 16), np.float32)
    expected = two_branch_engine.create_context()(x)["output"]
    refusals, wrong = [], []

    def worker():
        for _ in range(200):
            try:
                out = ctx(x)["output"]
                if not np.array_equal(out, expected):
                    wrong.append(out)
            except cgr.Error as error:
                refusals.append(str(error))

    threads = [threading.Thread(target=worker) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert wrong == []
    assert all(r == "this context is running an inference on another thread: use one context "
                    "per thread (engine.create_context())" for r in refusals)
