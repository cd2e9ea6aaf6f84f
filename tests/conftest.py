"""Shared fixtures: every test starts and ends with an empty dynacap cache and default config."""
import pathlib
import sys

import pytest

_ROOT = pathlib.Path(__file__).resolve().parents[1]
if str(_ROOT) not in sys.path:  # running from a checkout without `pip install -e .`
    sys.path.insert(0, str(_ROOT))
_TESTS = str(pathlib.Path(__file__).resolve().parent)
if _TESTS not in sys.path:  # `import differential` from any test module
    sys.path.insert(0, _TESTS)


@pytest.fixture(autouse=True)
def dynacap_reset():
    """``dynacap.reset()`` around each test, and check the test restored the config."""
    import dynacap

    before = dynacap.config.settings()
    dynacap.reset()
    yield
    dynacap.reset()
    after = dynacap.config.settings()
    assert after == before, f"the test left dynacap.config changed: {before} -> {after}"
