"""A seed gives the same figures on every CPU (docs/architecture.md, "The same answer on every machine").

The stored figures (gain_error.yaml, the README's table, the shipped studies) are compared exactly by other tests,
so they must not depend on the instruction set of the machine that runs them. This test runs tests/cpu_probe.py
twice, in fresh processes: on this CPU as it is, and as an older CPU would run it (numpy's SIMD dispatch held to
its baseline, numba compiling for a generic CPU into a cache of its own, OpenBLAS on its oldest kernels), and
requires every number to be bit for bit the same."""

from __future__ import annotations

import json
import os
import platform
import subprocess
import sys
from pathlib import Path

import pytest

PROBE = Path(__file__).with_name("cpu_probe.py")


def baseline_cpu_env(numba_cache: Path) -> dict[str, str]:
    """The environment of a CPU with none of this one's dispatched extensions."""
    from numpy._core._multiarray_umath import __cpu_dispatch__

    env = dict(os.environ)
    env["NPY_DISABLE_CPU_FEATURES"] = " ".join(__cpu_dispatch__)
    env["NUMBA_CPU_NAME"] = "generic"
    env["NUMBA_CACHE_DIR"] = str(numba_cache)
    if platform.machine().lower() in ("x86_64", "amd64"):
        env["OPENBLAS_CORETYPE"] = "Prescott"  # OpenBLAS's oldest x86-64 kernels (SSE3)
    return env


def _probe(env: dict[str, str]) -> dict:
    done = subprocess.run([sys.executable, str(PROBE)], env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout)


def _differences(host, baseline, path=""):
    if isinstance(host, dict):
        assert isinstance(baseline, dict) and host.keys() == baseline.keys(), path
        for key in host:
            yield from _differences(host[key], baseline[key], f"{path}.{key}")
    elif isinstance(host, list):
        assert isinstance(baseline, list) and len(host) == len(baseline), path
        for i, (a, b) in enumerate(zip(host, baseline)):
            yield from _differences(a, b, f"{path}[{i}]")
    elif host != baseline:
        yield f"{path}: {host} on this CPU, {baseline} on a baseline one"


def test_a_seed_gives_the_same_bits_on_a_baseline_cpu(tmp_path):
    host = _probe(dict(os.environ))
    baseline = _probe(baseline_cpu_env(tmp_path / "numba"))
    assert host["gain_check_trees"] and len(host["quickstart"]) == 13 and len(host["moe"]) == 3
    differences = list(_differences(host, baseline))
    assert not differences, "\n".join(differences[:20])


def test_the_baseline_environment_really_changes_the_cpu(tmp_path):
    """The switches take effect: numpy reports its dispatched extensions off, numba compiles for 'generic'."""
    code = ("import json, numba\nfrom numpy._core._multiarray_umath import __cpu_dispatch__, __cpu_features__\n"
            "print(json.dumps([[f for f in __cpu_dispatch__ if __cpu_features__.get(f)], numba.config.CPU_NAME]))")
    done = subprocess.run([sys.executable, "-c", code], env=baseline_cpu_env(tmp_path / "numba"),
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    enabled, cpu_name = json.loads(done.stdout.strip().splitlines()[-1])
    assert enabled == [] and cpu_name == "generic"


if __name__ == "__main__":  # pragma: no cover
    sys.exit(pytest.main([__file__, "-q"]))
