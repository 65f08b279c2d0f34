"""`simlab validate`: bad input is exit 2 with one line and nothing written."""

from __future__ import annotations

import pytest
import yaml

pytest.importorskip("torch")

from tests.helpers import run_cli  # noqa: E402

SCENARIO = "scenarios/validate_heavy.yaml"


def _scenario(tmp_path, **changes):
    data = yaml.safe_load(open(SCENARIO, encoding="utf-8"))
    for key, value in changes.items():
        data[key] = value
    path = tmp_path / "s.yaml"
    path.write_text(yaml.safe_dump(data), encoding="utf-8")
    return path


@pytest.mark.parametrize("change,field", [
    ({"arms": [{"name": "e", "method": "eagle3", "gamma": 4}]}, "arms[0].method"),
    ({"arms": [{"name": "o", "method": "dspark", "gamma": 4, "scheduler": {"kind": "oracle"}}]},
     "arms[0].scheduler.kind"),
    ({"engine": {"max_num_seqs": 16, "max_batch_tokens": 512, "replicas": 2}}, "engine.replicas"),
])
def test_what_the_real_engine_cannot_run_is_an_input_error(tmp_path, change, field):
    out = tmp_path / "out"
    code, _, err = run_cli("validate", str(_scenario(tmp_path, **change)), "--out", str(out))
    assert code == 2 and field in err and "Traceback" not in err
    assert not out.exists()


def test_bad_options_are_input_errors(tmp_path):
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "notes.txt").write_text("keep")
    code, _, err = run_cli("validate", SCENARIO, "--out", str(tmp_path / "mine"))
    assert code == 2 and "--out" in err and (tmp_path / "mine" / "notes.txt").read_text() == "keep"
    code, _, err = run_cli("validate", SCENARIO, "--device", "tpu", "--out", str(tmp_path / "o"))
    assert code == 2 and "--device" in err
    code, _, err = run_cli("validate", SCENARIO, "--profile", str(tmp_path / "none.yaml"), "--out",
                            str(tmp_path / "o"))
    assert code == 2 and "--profile" in err and not (tmp_path / "o").exists()
