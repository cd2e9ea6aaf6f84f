"""Distributed autograd is left alone: a captured forward making RPCs gives eager's gradients through dist_autograd.

Two RPC workers on loopback (spawned processes, TensorPipe over TCP).
Worker 0 runs the same forward eagerly and under ``dynacap.optimize``
inside ``dist_autograd.context()``: the ``rpc_sync`` to worker 1 is a graph
break (it runs eagerly, so torch attaches its ``SendRpcBackward`` /
``RecvRpcBackward`` nodes), then ``dist_autograd.backward`` runs across both
workers — also inside ``compiled_autograd.enable``, which must not touch the
distributed engine.  Worker 0 reports losses, gradients and the autograd
node types it saw; the test compares them.
"""
from __future__ import annotations

import socket

import pytest
import torch
import torch.multiprocessing as mp

rpc = pytest.importorskip("torch.distributed.rpc")
if not torch.distributed.is_available() or not hasattr(rpc, "TensorPipeRpcBackendOptions"):
    pytest.skip("torch.distributed.rpc with TensorPipe is not available", allow_module_level=True)


def remote_scale(t, k):
    return t * k


def node_types(loss) -> set[str]:
    seen, stack, names = set(), [loss.grad_fn], set()
    while stack:
        node = stack.pop()
        if node is None or node in seen:
            continue
        seen.add(node)
        names.add(node.name().rpartition("::")[2])
        stack.extend(f for f, _ in node.next_functions)
    return names


def forward(x, w):
    h = (x @ w).relu()
    remote = rpc.rpc_sync("worker1", remote_scale, args=(h, 3.0))
    return (remote.sin() * w.sum()).sum()


def run_worker0(queue):
    import torch.distributed.autograd as dist_autograd

    import dynacap
    from dynacap import compiled_autograd

    torch.manual_seed(0)
    w = torch.randn(4, 4, requires_grad=True)
    x = torch.randn(3, 4)
    captured = dynacap.optimize(forward, backend="aot_eager")
    results = {}
    for name, fn, ca in [("eager", forward, False), ("dynacap", captured, False),
                         ("dynacap+compiled_autograd", captured, True)]:
        with dist_autograd.context() as context_id:
            loss = fn(x, w)
            context = dist_autograd._retrieve_context(context_id)
            nodes = node_types(loss) | {f"{len(context._send_functions())} send, {len(context._recv_functions())} recv"}
            if ca:
                with compiled_autograd.enable("eager"):
                    dist_autograd.backward(context_id, [loss])
            else:
                dist_autograd.backward(context_id, [loss])
            grad = dist_autograd.get_gradients(context_id)[w].clone()
        # Plain lists: a tensor in the queue would be shared memory that dies with this process.
        results[name] = (loss.item(), grad.tolist(), nodes, w.grad)
    explained = dynacap.explain(forward)(x, w)
    queue.put({"results": results, "breaks": explained.graph_break_count, "graphs": explained.graph_count})


def worker(rank, port, queue):
    options = rpc.TensorPipeRpcBackendOptions(init_method=f"tcp://127.0.0.1:{port}", num_worker_threads=4,
                                              _transports=["uv"])
    rpc.init_rpc(f"worker{rank}", rank=rank, world_size=2, rpc_backend_options=options)
    try:
        if rank == 0:
            try:
                run_worker0(queue)
            except BaseException as e:
                queue.put({"error": f"{type(e).__name__}: {e}"})
    finally:
        rpc.shutdown()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_rpc_forward_under_dist_autograd_gives_eager_gradients():
    context = mp.get_context("spawn")
    queue = context.Queue()
    port = free_port()
    workers = [context.Process(target=worker, args=(rank, port, queue)) for rank in range(2)]
    for p in workers:
        p.start()
    try:
        report = queue.get(timeout=240)
    finally:
        for p in workers:
            p.join(60)
            if p.is_alive():
                p.kill()
    assert "error" not in report, report.get("error")
    results = report["results"]
    loss, grad, nodes, local_grad = results["eager"]
    assert "RecvRpcBackward" in nodes, nodes  # the remote result's node
    assert "1 send, 1 recv" in nodes  # the context holds the request's SendRpcBackward and the reply's Recv
    for name in ("dynacap", "dynacap+compiled_autograd"):
        c_loss, c_grad, c_nodes, c_local = results[name]
        assert c_loss == loss, name
        torch.testing.assert_close(torch.tensor(c_grad), torch.tensor(grad), rtol=1e-5, atol=1e-5)
        assert {"RecvRpcBackward", "1 send, 1 recv"} <= c_nodes, (name, c_nodes)  # the graphs' nodes around them
        assert c_local is None  # distributed autograd keeps gradients in its context, not in .grad
    assert report["graphs"] == 2 and report["breaks"] >= 1  # the RPC runs eagerly between two graphs
    assert all(p.exitcode == 0 for p in workers), [p.exitcode for p in workers]
