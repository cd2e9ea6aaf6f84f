"""Integration: HuggingFace `transformers` models run under dynacap with the eager result (issue 7, item 1).

Tiny configs built in code (``transformers_models.py``), no downloads.  Marked
``transformers``; skipped when the package is not installed (it is in the
``test`` extra, pinned).  Each model runs eagerly and twice under
``dynacap.optimize`` (the second call must hit the cache); outputs must match.
"""
import pytest
import torch

import dynacap
from differential import CountingBackend, assert_same

transformers = pytest.importorskip("transformers")

from transformers_models import build  # noqa: E402

pytestmark = pytest.mark.transformers

ARCHITECTURES = ["bert", "gpt2", "llama", "t5", "vit", "wav2vec2", "whisper"]


def _outputs(out):
    return tuple(v for v in out.to_tuple() if isinstance(v, torch.Tensor))


@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
@pytest.mark.parametrize("name", ARCHITECTURES)
def test_model_gives_the_eager_result(name, backend):
    model, kwargs = build(name)
    model.eval()
    counting = CountingBackend(inner=backend)
    with torch.no_grad():
        expected = _outputs(model(**kwargs))
        optimized = dynacap.optimize(model, backend=counting)
        first = _outputs(optimized(**kwargs))
        compiles = counting.compiles
        second = _outputs(optimized(**kwargs))
    assert_same(expected, first, "first call", rtol=1e-4, atol=1e-5)
    assert_same(expected, second, "second call", rtol=1e-4, atol=1e-5)
    assert counting.compiles == compiles, "the second call with the same inputs compiled again"
    assert compiles >= 1, "nothing was captured"


def test_config_attribute_access_under_capture():
    # PretrainedConfig.__getattribute__ calls zero-argument super() after a graph break.
    model, kwargs = build("bert")
    config = model.config

    def read(x):
        return x * config.hidden_size, config.return_dict

    expected = read(torch.ones(2))
    assert_same(expected, dynacap.optimize(read, backend="eager")(torch.ones(2)))


@pytest.mark.parametrize("name", ARCHITECTURES)
def test_model_is_one_graph_without_breaks(name):
    # ModelOutput objects made, read and returned in the graph; config views iterated; os.environ read.
    # T5 and Whisper: get_text_config(decoder=True) deep-copies and validates the config inside forward
    # (models/copying.py; huggingface_hub's validators keyed by typing constructs and ABCs), about 80,000
    # and 120,000 instructions in one capture.
    model, kwargs = build(name)
    model.eval()
    with torch.no_grad():
        expected = _outputs(model(**kwargs))
        explained = dynacap.explain(model)(**kwargs)
    assert_same(expected, _outputs(explained.result), "explain result", rtol=1e-4, atol=1e-5)
    assert explained.graph_count == 1 and not explained.break_reasons, [b.reason for b in explained.break_reasons]
