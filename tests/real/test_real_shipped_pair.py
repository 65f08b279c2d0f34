"""The pair shipped in real_pair/: it loads, is small, is lossless at temperature 0, and its documented tau
at gamma = 7 is what the measurement gives (within a tolerance derived from the number of rounds)."""

from __future__ import annotations

import hashlib
import json
import math
import re
import struct

import pytest

torch = pytest.importorskip("torch")

from simlab.real.corpus import load_corpus  # noqa: E402
from simlab.real.engine import DecodingConfig, Request, SpeculativeEngine  # noqa: E402
from simlab.real.evaluate import measure_tau  # noqa: E402
from simlab.real.generate import plain_generate  # noqa: E402
from simlab.real.pair import default_pair_dir, load_pair  # noqa: E402

PAIR = default_pair_dir()
MAX_BYTES = 20_000_000
# |measured - documented| <= Z * sqrt(SE_doc^2 + SE_now^2): two measurements of the same mean, rounds treated as
# independent; Z = 4 is a two-sided 6e-5 false-alarm rate under that normal approximation.
Z = 4.0

pytestmark = pytest.mark.skipif(not (PAIR / "target" / "config.json").exists(), reason="no shipped pair")


@pytest.fixture(scope="module")
def pair():
    return load_pair(PAIR)


@pytest.fixture(scope="module")
def heldout():
    return load_corpus().validation


def test_pair_is_small_and_documented(pair):
    sizes = [p.stat().st_size for p in PAIR.rglob("*") if p.is_file()]
    assert sum(sizes) <= MAX_BYTES
    metrics = pair.metrics
    assert metrics["eval_settings"]["gamma"] == 7
    readme = (PAIR / "README.md").read_text()
    assert metrics["command"] in readme and f"seed {metrics['seed']}" in readme
    for temperature, numbers in metrics["tau"].items():
        assert re.search(rf"\| {re.escape(temperature)} \| {numbers['tau']:.3f} \|", readme)


# sha256 over (name, dtype, raw bytes) of every tensor, names sorted, as the hand-written reader that the
# safetensors package replaced read them (computed with it before it was removed)
WEIGHT_DIGESTS = {
    "target": (46, "15901bcd173b0573359ed68bb7c627c97d9cf50333e29f037f2dc91190126c4c"),
    "drafter": (30, "1699e0878364e8a816fef8800e7b7d89e2ea041a9eaa92b9349e04aa17bdfea3"),
}
_RAW_DTYPES = {"BF16": torch.bfloat16, "F32": torch.float32, "F16": torch.float16}


def _raw_tensors(path):
    """The file parsed from the format's definition (u64 header length, JSON header, raw little-endian data)."""
    blob = path.read_bytes()
    (size,) = struct.unpack("<Q", blob[:8])
    header = json.loads(blob[8 : 8 + size])
    header.pop("__metadata__", None)
    start = 8 + size
    tensors = {}
    for name, entry in header.items():
        begin, end = entry["data_offsets"]
        tensors[name] = (entry["dtype"], entry["shape"], blob[start + begin : start + end])
    return tensors


@pytest.mark.parametrize("part", ["target", "drafter"])
def test_shipped_weights_load_bit_for_bit(pair, part):
    from simlab.real.hf_checkpoint import iter_tensors

    path = PAIR / part / "model.safetensors"
    raw = _raw_tensors(path)
    loaded = dict(iter_tensors(path))
    assert set(loaded) == set(raw)
    digest = hashlib.sha256()
    for name in sorted(loaded):
        dtype, shape, data = raw[name]
        tensor = loaded[name]
        assert tensor.dtype == _RAW_DTYPES[dtype] and list(tensor.shape) == shape
        as_bytes = tensor.contiguous().view(-1).view(torch.uint8).numpy().tobytes()
        assert as_bytes == data, name
        digest.update(name.encode())
        digest.update(str(tensor.dtype).encode())
        digest.update(as_bytes)
    assert (len(loaded), digest.hexdigest()) == WEIGHT_DIGESTS[part]
    # the loaded model holds exactly those values (bf16 -> float32 is exact)
    model = pair.target if part == "target" else pair.drafter
    params = dict(model.named_parameters(remove_duplicate=False)) if part == "target" else dict(model.state_dict())
    for name, tensor in loaded.items():
        local = name[len("model."):] if part == "target" and name.startswith("model.") else name
        assert torch.equal(params[local].detach(), tensor.to(params[local].dtype)), name


def test_documented_tau_at_gamma_7_is_measured(pair, heldout):
    settings = pair.metrics["eval_settings"]
    documented = pair.metrics["tau"]["1"]
    report = measure_tau(
        pair.target, pair.drafter, heldout, gamma=settings["gamma"], temperature=1.0,
        num_prompts=settings["num_prompts"], prompt_len=settings["prompt_len"],
        max_new_tokens=settings["max_new_tokens"], seed=settings["seed"], max_num_seqs=settings["max_num_seqs"],
    )
    assert report.tau > 1.5
    tolerance = Z * math.hypot(documented["standard_error"], report.standard_error)
    assert abs(report.tau - documented["tau"]) <= tolerance, (report.tau, documented, tolerance)


def test_shipped_pair_is_lossless_at_temperature_zero(heldout):
    pair64 = load_pair(PAIR, dtype=torch.float64)  # float64: no near-tie can flip an argmax
    prompts = [tuple(int(t) for t in heldout[s: s + n]) for s, n in ((1000, 40), (52_000, 17), (90_000, 64))]
    budgets = [60, 45, 30]
    reference = plain_generate(pair64.target, prompts, budgets)
    engine = SpeculativeEngine(pair64.target, pair64.drafter, decoding=DecodingConfig(gamma=7, max_seq_len=160))
    requests = [Request(id=i, prompt_ids=p, max_new_tokens=b) for i, (p, b) in enumerate(zip(prompts, budgets))]
    result = engine.run(requests)
    assert [result.outputs[i] for i in range(3)] == reference
    assert result.tau > 1.5
