"""Bad input gets exit status 2 and one message naming the file and the field: never a traceback, never a
results folder. Mutations of the contract files are generated with hypothesis."""

import copy
from pathlib import Path

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from helpers import CONTRACT_DIR, run_cli, write_scenario

CONTRACT_FILES = ("full.yaml", "inline.yaml", "closed_loop.yaml")
FREE_FORM_MAPPINGS = {"domains", "methods", "provenance"}  # keys here are user-chosen names, not fields

REQUIRED = {
    "full.yaml": ["name", "workload", "hardware", "acceptance", "arms", "workload.kind", "workload.path",
                  "hardware.kind", "hardware.gpu", "hardware.model", "acceptance.kind", "acceptance.name",
                  "arms[1].method", "arms[1].gamma", "arms[4].scheduler.kind", "arms[4].scheduler.threshold"],
    "inline.yaml": ["workload.rate", "workload.num_requests", "workload.prompt_tokens", "workload.output_tokens",
                    "workload.prompt_tokens.dist", "workload.output_tokens.high", "hardware.verify",
                    "hardware.verify.step_s", "acceptance.methods", "arms[2].scheduler.kind"],
    "closed_loop.yaml": ["workload.concurrency", "workload.num_requests", "acceptance.alpha", "arms[1].method"],
}


def load(name: str) -> dict:
    return yaml.safe_load((CONTRACT_DIR / name).read_text())


def dotted(path: tuple) -> str:
    text = ""
    for part in path:
        text += f"[{part}]" if isinstance(part, int) else (("." if text else "") + str(part))
    return text


def walk(node, path=()):
    """Yield (path, value) for every node below the root."""
    if isinstance(node, dict):
        for key, value in node.items():
            yield path + (key,), value
            if key not in FREE_FORM_MAPPINGS:
                yield from walk(value, path + (key,))
    elif isinstance(node, list):
        for i, value in enumerate(node):
            yield path + (i,), value
            yield from walk(value, path + (i,))


def get(node, path):
    for part in path:
        node = node[part]
    return node


def mutations(name: str) -> list[tuple[str, tuple, str]]:
    """Every mutation of one contract file that must be rejected: (kind, path, field the message must name)."""
    data = load(name)
    found = [("unknown_field", (), "bogus_field")]
    for path, value in walk(data):
        field_prefix = dotted(tuple(p for p in path))
        named = dotted(path[: max(i for i, p in enumerate(path) if isinstance(p, str)) + 1])
        if isinstance(value, dict) and path[-1] not in FREE_FORM_MAPPINGS:
            found.append(("unknown_field", path, f"{field_prefix}.bogus_field"))
        elif isinstance(value, bool):
            continue
        elif isinstance(value, (int, float)):
            found.append(("not_a_number", path, named))
        elif isinstance(value, str):
            found.append(("bad_string", path, named))
    for required in REQUIRED.get(name, []):
        found.append(("delete", _parse(required), required))
    return found


def _parse(text: str) -> tuple:
    parts: list = []
    for chunk in text.split("."):
        while "[" in chunk:
            head, rest = chunk.split("[", 1)
            if head:
                parts.append(head)
            index, chunk = rest.split("]", 1)
            parts.append(int(index))
        if chunk:
            parts.append(chunk)
    return tuple(parts)


def apply(data: dict, kind: str, path: tuple) -> dict:
    data = copy.deepcopy(data)
    parent = get(data, path[:-1]) if path else None
    if kind == "unknown_field":
        get(data, path)["bogus_field"] = 1
    elif kind == "not_a_number":
        parent[path[-1]] = "oops"
    elif kind == "bad_string":
        parent[path[-1]] = "bogus value!"
    elif kind == "delete":
        del parent[path[-1]]
    return data


ALL = [(name, *m) for name in CONTRACT_FILES for m in mutations(name)]


def check_rejected(tmp_path: Path, data: dict, field: str) -> str:
    path = write_scenario(tmp_path, data, "mutated.yaml")
    out = tmp_path / "out"
    code, stdout, stderr = run_cli("run", str(path), "--out", str(out), "--quiet")
    assert code == 2, (field, stderr)
    assert "Traceback" not in stderr and "Traceback" not in stdout
    assert len(stderr.strip().splitlines()) == 1, stderr
    assert "mutated.yaml" in stderr, stderr
    assert field in stderr, (field, stderr)
    assert not out.exists()
    assert [p.name for p in tmp_path.iterdir()] == ["mutated.yaml"]
    return stderr


def test_every_kind_of_mutation_is_generated():
    kinds = {m[1] for m in ALL}
    assert kinds == {"unknown_field", "not_a_number", "bad_string", "delete"}
    assert len(ALL) > 100


@settings(
    max_examples=200, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(st.sampled_from(ALL))
def test_mutated_contract_files_are_rejected_naming_the_field(tmp_path_factory, mutation):
    name, kind, path, field = mutation
    tmp_path = tmp_path_factory.mktemp("mutation")
    check_rejected(tmp_path, apply(load(name), kind, path), field)


def test_missing_trace_file(tmp_path):
    data = load("full.yaml")
    data["workload"]["path"] = "no/such/trace.csv"
    message = check_rejected(tmp_path, data, "workload.path")
    assert "no/such/trace.csv" in message


def test_malformed_trace_row(tmp_path):
    trace = tmp_path / "trace.csv"
    trace.write_text(
        "TIMESTAMP,ContextTokens,GeneratedTokens\n"
        "2023-11-16 18:15:46.6805900,374,44\n"
        "2023-11-16 18:15:50.9951690,396,lots\n"
        "2023-11-16 18:15:51.0000000,120,9\n"
    )
    data = load("full.yaml")
    data["workload"]["path"] = "trace.csv"
    path = write_scenario(tmp_path, data, "mutated.yaml")
    code, _, stderr = run_cli("run", str(path), "--out", str(tmp_path / "out"), "--quiet")
    assert code == 2
    assert "trace.csv" in stderr and "GeneratedTokens" in stderr and "lots" in stderr
    assert "line 3" in stderr, stderr
    assert "Traceback" not in stderr and not (tmp_path / "out").exists()


@pytest.mark.parametrize(
    "text,expected",
    [
        ("name: [unclosed\n", "not valid YAML"),
        ("", "must be a mapping"),
        ("- just\n- a list\n", "must be a mapping"),
    ],
)
def test_unreadable_scenarios(tmp_path, text, expected):
    path = tmp_path / "broken.yaml"
    path.write_text(text)
    code, _, stderr = run_cli("run", str(path), "--out", str(tmp_path / "out"))
    assert code == 2 and expected in stderr and "broken.yaml" in stderr
    assert not (tmp_path / "out").exists()


def test_missing_scenario_file(tmp_path):
    code, _, stderr = run_cli("run", str(tmp_path / "nope.yaml"))
    assert code == 2 and "nope.yaml" in stderr and "Traceback" not in stderr


def test_request_larger_than_kv_cache(tmp_path):
    data = load("inline.yaml")
    data["engine"]["kv_cache_tokens"] = 1000
    check_rejected(tmp_path, data, "engine.kv_cache_tokens")


def test_max_batch_tokens_below_max_num_seqs(tmp_path):
    data = load("inline.yaml")
    data["engine"]["max_batch_tokens"] = 32
    check_rejected(tmp_path, data, "engine.max_batch_tokens")


def test_usage_errors_exit_2_without_traceback(tmp_path):
    for args in (["run", "--bogus"], ["no-such-command"], ["run"]):
        code, _, stderr = run_cli(*args)
        assert code == 2, (args, stderr)
        assert "Traceback" not in stderr


def test_commands_that_end_with_a_status_keep_it(tmp_path, monkeypatch):
    import builtins

    real_import = builtins.__import__

    def no_torch(name, *args, **kwargs):
        if name == "torch" or name.startswith("torch."):
            raise ImportError("no torch here")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_torch)
    code, _, stderr = run_cli("real", "generate", "--prompt", "def ")
    assert code == 2 and "needs torch" in stderr
