"""`simlab --help` starts fast: the command line and its mounted sub-commands import no numerical library.

Each check runs in a fresh interpreter (this test process has long imported everything). A new sub-command
must keep its heavy imports inside the command functions (see the lazy package exports in simlab/common/lazy.py).
Start-up time itself is measured by benchmarks/bench_cli_startup.py, not asserted here."""

from __future__ import annotations

import subprocess
import sys

import pytest

HEAVY = ("pandas", "numpy", "scipy", "matplotlib", "torch", "simpy", "pydantic", "yaml", "numba")


def _loaded_heavy(code: str) -> list[str]:
    probe = f"{code}; import sys; print(' '.join(m for m in {HEAVY!r} if m in sys.modules))"
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return done.stdout.split()


@pytest.mark.parametrize("code", [
    "import simlab.cli",
    "import simlab.cli as cli; cli._mount_subcommands()",  # what `simlab --help` does before printing
    "import simlab",
], ids=["import", "mounted", "package"])
def test_command_line_imports_no_heavy_module(code):
    assert _loaded_heavy(code) == []


def test_help_lists_every_mounted_command_without_heavy_imports():
    code = ("import sys, simlab.cli as cli\n"
            "sys.argv = ['simlab', '--help']\n"
            "try:\n    cli.main()\nexcept SystemExit:\n    pass")
    probe = code + f"\nprint('HEAVY', ' '.join(m for m in {HEAVY!r} if m in sys.modules))"
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120,
                          env={"COLUMNS": "200", "PATH": ""})
    assert done.returncode == 0, done.stderr
    assert done.stdout.rstrip().splitlines()[-1] == "HEAVY"
    for command in ("run", "report", "audit", "profile", "profiles", "traces", "real", "validate", "acceptance",
                    "calibrate"):
        assert f" {command} " in done.stdout, command


def test_lazy_package_exports_resolve():
    import simlab.acceptance
    import simlab.audit
    import simlab.hardware
    import simlab.workload

    for package in (simlab.acceptance, simlab.audit, simlab.hardware, simlab.workload):
        for name in package.__all__:
            assert getattr(package, name) is not None, (package.__name__, name)
        assert set(package.__all__) <= set(dir(package))
        with pytest.raises(AttributeError):
            package.no_such_name  # noqa: B018
