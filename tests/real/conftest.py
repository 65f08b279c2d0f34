"""Fixtures for real-mode tests; without torch the whole folder is skipped at collection."""

from __future__ import annotations

import pytest

try:
    import torch  # noqa: F401
except ImportError:  # pragma: no cover - depends on the environment
    collect_ignore_glob = ["test_*.py"]
else:

    @pytest.fixture(autouse=True, scope="package")
    def one_torch_thread():
        """Tiny models gain nothing from a second thread, and on a CPU shared with other jobs spinning
        OpenMP workers make every small op wait; restore the setting afterwards."""

        before = torch.get_num_threads()
        torch.set_num_threads(1)
        yield
        torch.set_num_threads(before)

    @pytest.fixture
    def pair64():
        """A random float64 DSpark pair on the tiny target."""
        from .models import build_pair

        return build_pair(0)
