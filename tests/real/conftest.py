"""Fixtures for real-mode tests. Without torch every test module here is reported as skipped, with the reason,
instead of being left out of the collection."""

from __future__ import annotations

import pytest

try:
    import torch
except ImportError:  # pragma: no cover - depends on the environment
    torch = None

NO_TORCH_REASON = "real mode needs torch: pip install torch==2.13.0 'simlab[real]'"

if torch is None:

    class _SkippedModule(pytest.Module):
        """A test module that is not imported (it needs torch): collecting it reports one skip."""

        def collect(self):
            pytest.skip(NO_TORCH_REASON)

    def pytest_pycollect_makemodule(module_path, parent):
        return _SkippedModule.from_parent(parent, path=module_path)

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
