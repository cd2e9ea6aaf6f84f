"""PT2E quantization on ``dynacap.export`` programs (issue 13, item 4); skipped without torchao.

prepare -> calibrate -> convert with torchao's X86 Inductor quantizer (and
its XNNPACK test quantizer), compared with the float model on held-out
random inputs, and with the same flow on ``torch.export.export``'s program.
"""
import pytest
import torch
import torch.nn as nn

from dynacap.export import capture_pre_autograd_graph, export
from tests.test_export import ConvBnLinear

pytest.importorskip("torchao.quantization.pt2e")

from torchao.quantization.pt2e.quantize_pt2e import convert_pt2e, prepare_pt2e  # noqa: E402
from torchao.quantization.pt2e.quantizer.x86_inductor_quantizer import (  # noqa: E402
    X86InductorQuantizer,
    get_default_x86_inductor_quantization_config,
)

SHAPE = (2, 3, 8, 8)


def quantize(gm, quantizer):
    prepared = prepare_pt2e(gm, quantizer)
    torch.manual_seed(1)
    for _ in range(16):
        prepared(torch.randn(*SHAPE))
    return convert_pt2e(prepared)


def x86():
    return X86InductorQuantizer().set_global(get_default_x86_inductor_quantization_config())


def quantize_ops(gm) -> int:
    return sum(1 for n in gm.graph.nodes if n.op == "call_function" and "quantize_per" in str(n.target)
               and "dequantize" not in str(n.target))


def held_out_error(m, q) -> float:
    torch.manual_seed(2)
    tests = [torch.randn(*SHAPE) for _ in range(8)]
    with torch.no_grad():
        return max((q(t) - m(t)).abs().max().item() for t in tests)


def test_x86_int8_model_stays_close_to_float():
    torch.manual_seed(0)
    m = ConvBnLinear().eval()
    q = quantize(capture_pre_autograd_graph(m, (torch.randn(*SHAPE),)), x86())
    assert quantize_ops(q) >= 2
    assert not any("batch_norm" in str(n.target) for n in q.graph.nodes)  # folded into the conv
    assert held_out_error(m, q) < 0.2


def test_same_numerics_as_the_torch_export_route():
    torch.manual_seed(0)
    m = ConvBnLinear().eval()
    x = torch.randn(*SHAPE)
    ours = quantize(export(m, (x,)).module(), x86())
    theirs = quantize(torch.export.export(m, (x,)).module(), x86())
    assert quantize_ops(ours) == quantize_ops(theirs)
    torch.manual_seed(3)
    t = torch.randn(*SHAPE)
    torch.testing.assert_close(ours(t), theirs(t))


def test_xnnpack_quantizer_annotates_linear_and_conv():
    xnnpack = pytest.importorskip("torchao.testing.pt2e._xnnpack_quantizer")
    torch.manual_seed(0)
    m = nn.Sequential(nn.Conv2d(3, 4, 3), nn.ReLU(), nn.Flatten(), nn.Linear(4 * 6 * 6, 5)).eval()
    quantizer = xnnpack.XNNPACKQuantizer().set_global(xnnpack.get_symmetric_quantization_config())
    q = quantize(capture_pre_autograd_graph(m, (torch.randn(*SHAPE),)), quantizer)
    assert quantize_ops(q) >= 4
    assert held_out_error(m, q) < 0.2
