"""Hook hygiene through the whole pipeline: threads, recursion, nesting, exceptions, leaks."""
import gc
import threading
import tracemalloc
import weakref

import pytest
import torch

import dynacap
from dynacap import _C
from differential import CountingBackend


def pointwise(x):
    return torch.sin(x) * 2 + 1


def test_capture_in_one_thread_does_not_capture_another():
    backend = CountingBackend()
    f = dynacap.optimize(pointwise, backend=backend)
    other_started, release = threading.Event(), threading.Event()
    other_results = []

    def other():
        other_started.set()
        release.wait(5)
        other_results.append(pointwise(torch.ones(3)))  # not under optimize: must not be captured

    thread = threading.Thread(target=other)
    thread.start()
    other_started.wait(5)
    assert torch.allclose(f(torch.ones(3)), pointwise(torch.ones(3)))
    release.set()
    thread.join(5)
    assert backend.compiles == 1
    dynacap.reset()
    before = backend.compiles
    # The other thread's frames ran with no callback: nothing new was captured for them.
    assert backend.compiles == before
    assert torch.allclose(other_results[0], pointwise(torch.ones(3)))
    assert not _C.hook_installed()


def test_threads_capturing_concurrently_get_correct_results():
    f = dynacap.optimize(pointwise, backend="eager")
    errors = []

    def work(seed):
        x = torch.randn(4, generator=torch.Generator().manual_seed(seed))
        for _ in range(50):
            if not torch.allclose(f(x), pointwise(x)):
                errors.append(seed)

    threads = [threading.Thread(target=work, args=(s,)) for s in range(4)]
    for th in threads:
        th.start()
    for th in threads:
        th.join(30)
    assert not errors
    assert not _C.hook_installed()


def fib(n, x):
    if n < 2:
        return x
    return fib(n - 1, x) + fib(n - 2, x)


def test_recursion_through_captured_frames():
    f = dynacap.optimize(fib, backend="eager")
    x = torch.ones(2)
    assert torch.equal(f(12, x), fib(12, x))


def test_nested_optimize_inner_backend_and_outer_capture():
    outer_backend, inner_backend = CountingBackend(), CountingBackend()

    @dynacap.optimize(backend=inner_backend)
    def inner(x):
        return x.cos() + 1

    def outer(x):
        y = x.sin()
        print("outer")  # a break: the rest of outer and the call to inner run under the outer callback
        return inner(y) * 2

    f = dynacap.optimize(outer, backend=outer_backend)
    x = torch.randn(3)
    torch.testing.assert_close(f(x), outer(x))
    assert outer_backend.compiles >= 1
    assert not _C.hook_installed()


def test_exception_through_captured_frame_leaves_hook_off_and_state_clean():
    def bad(x):
        y = x + 1
        return y[10]  # IndexError at run time

    f = dynacap.optimize(bad, backend="eager")
    for _ in range(3):
        with pytest.raises(IndexError):
            f(torch.ones(3))
    assert not _C.hook_installed()
    assert torch.is_grad_enabled()


def _cycle():
    class Net(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = torch.nn.Linear(8, 8)

        def forward(self, x):
            y = self.lin(x).relu()
            print("mid", end="")
            return y * 2

    net = Net()
    f = dynacap.optimize(net, backend="eager")
    f(torch.randn(2, 8))
    f(torch.randn(2, 8))
    ref = weakref.ref(net)
    dynacap.reset()
    return ref


def test_compile_reset_cycles_do_not_leak(capsys):
    for _ in range(5):
        _cycle()
    gc.collect()
    tracemalloc.start()
    start, _ = tracemalloc.get_traced_memory()
    refs = [_cycle() for _ in range(40)]
    gc.collect()
    end, _ = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    alive = sum(r() is not None for r in refs)
    assert alive == 0, f"{alive} of 40 captured modules are still alive after reset()"
    assert end - start < 2_000_000, f"memory grew by {end - start} bytes over 40 compile/reset cycles"


def test_default_dtype_and_autocast_changes_recompile():
    def make(x):
        return torch.zeros(3) + x.sum()

    backend = CountingBackend()
    f = dynacap.optimize(make, backend=backend)
    x = torch.ones(3, dtype=torch.float64)
    assert f(x).dtype == make(x).dtype
    previous = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)
    try:
        assert f(x).dtype == make(x).dtype == torch.float64
    finally:
        torch.set_default_dtype(previous)
    assert backend.compiles == 2
    with torch.autocast("cpu"):
        torch.testing.assert_close(f(x), make(x))
    assert backend.compiles == 3
