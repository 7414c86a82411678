"""Component tests run many tiny torch ops: one intra-op thread avoids sync cost and stalls on a
busy 2-core machine (the setting is restored after each test)."""

import pytest

from components.training import torch_threads


@pytest.fixture(autouse=True)
def _one_torch_thread():
    with torch_threads(1):
        yield
