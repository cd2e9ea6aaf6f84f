"""Export a model with dynacap and quantize it to int8 with PT2E (needs ``pip install 'dynacap[quant]'``).

    python examples/quantize_pt2e.py

dynacap captures the model's bytecode into one pre-dispatch ATen graph (the
graph ``torch.export`` would give), torchao's X86 Inductor quantizer
annotates it, calibration runs a few batches, and ``convert_pt2e`` gives
the int8 model, compared here with the float one on held-out inputs.
"""
import io

import torch
import torch.nn as nn
from torch.export import Dim

import dynacap


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 3)
        self.bn = nn.BatchNorm2d(8)
        self.fc = nn.Linear(8 * 6 * 6, 10)

    def forward(self, x):
        return self.fc(torch.relu(self.bn(self.conv(x))).flatten(1))


def main():
    from torchao.quantization.pt2e.quantize_pt2e import convert_pt2e, prepare_pt2e
    from torchao.quantization.pt2e.quantizer.x86_inductor_quantizer import (
        X86InductorQuantizer,
        get_default_x86_inductor_quantization_config,
    )

    torch.manual_seed(0)
    model = Net().eval()
    example = torch.randn(4, 3, 8, 8)

    # 1. export: a real ExportedProgram, batch dim dynamic
    program = dynacap.export(model, (example,), dynamic_shapes={"x": {0: Dim("batch", max=256)}})
    print("ops:", [str(n.target) for n in program.graph.nodes if n.op == "call_function"])
    print("range constraints:", program.range_constraints)
    buffer = io.BytesIO()
    torch.export.save(program, buffer)
    print(f"saved program: {len(buffer.getvalue())} bytes")

    # 2. PT2E: annotate, calibrate, convert
    quantizer = X86InductorQuantizer().set_global(get_default_x86_inductor_quantization_config())
    prepared = prepare_pt2e(program.module(), quantizer)
    for _ in range(32):
        prepared(torch.randn(4, 3, 8, 8))
    quantized = convert_pt2e(prepared)
    q_ops = [n for n in quantized.graph.nodes if "quantize_per" in str(n.target)]
    print(f"quantize/dequantize ops: {len(q_ops)}")

    # 3. int8 against float, on inputs calibration never saw (other batch sizes too)
    with torch.no_grad():
        for batch in (1, 4, 9):
            x = torch.randn(batch, 3, 8, 8)
            ref, out = model(x), quantized(x)
            sqnr = 20 * torch.log10(ref.norm() / (out - ref).norm())
            print(f"batch {batch}: max |int8 - float| = {(out - ref).abs().max():.4f}, SQNR {sqnr:.1f} dB")


if __name__ == "__main__":
    main()
