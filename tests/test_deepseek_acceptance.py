"""The acceptance the DeepSeek studies run on (scenarios/acceptance/deepseek-v3-mtp.yaml): what its script writes,
DeepSeek-V3's MTP-1 at the 87.5 % second-token acceptance its report states, the other drafters the qwen3-14b
preset's."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from simlab.acceptance.build import build_acceptance
from simlab.acceptance.expected import expected_tokens_per_round

REPO = Path(__file__).resolve().parents[1]
FILE = REPO / "scenarios" / "acceptance" / "deepseek-v3-mtp.yaml"


def test_the_file_is_what_its_script_writes():
    run = subprocess.run([sys.executable, str(REPO / "scripts" / "derive_deepseek_acceptance.py"), "--check"],
                         capture_output=True, text=True)
    assert run.returncode == 0, run.stderr


def test_mtp1_accepts_its_second_token_at_the_reported_rate_and_dspark_is_the_qwen3_14b_fit():
    spec = build_acceptance(str(FILE), file=None)
    qwen = build_acceptance("qwen3-14b", file=None)
    for domain in ("chat", "code", "math"):
        assert expected_tokens_per_round(spec, "mtp", domain, 1, pooled=True) == pytest.approx(1.875, abs=1e-6)
        assert np.array_equal(spec.curve("dspark", domain, 7), qwen.curve("dspark", domain, 7))
