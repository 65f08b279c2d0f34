"""Derive the n-gram (prompt lookup) and suffix-decoding acceptance simlab ships (simlab/acceptance/other_drafters.yaml)
from SpecDecode-Bench's released per-position n-gram acceptance (github.com/SpecDecode-Bench/simulator,
data/llama3.1-8B/combined_{sharegpt,cnn,gsm8k,instructcoder}.jsonl: Llama-3.1-8B-Instruct under vLLM 0.10.1 on an
H100; arXiv 2601.11580).

For each domain and draft length gamma = 1..16, the recorded requests are replayed in rounds of gamma drafts (a round
at output position p accepts min(acc_len[p] - 1, gamma) tokens), and tau(gamma) is the mean tokens a round emits,
pooled over rounds. simlab's lookup model (docs/acceptance.md, "Lookup drafters") has a round find a match with
probability m and, given a match, accept position k with probability c_k, so that a round of gamma drafts emits
1 + sum_{k <= gamma} m c_1 ... c_k tokens: the survivals S_k = tau(k) - tau(k - 1) give m c_1 = S_1 and c_k =
S_k / S_(k-1), and the model reproduces the replayed tau at every gamma up to 9 (beyond, where a replay's
survival rises again, the curve holds it level: up to 0.033 token a round less, code editing at gamma 16). What
the records cannot say is how a round
that accepts nothing splits into "no match" and "a match rejected at once": the split is SpecDecode-Bench's own
simulator's (simulator.py, NGRAM_MATCHING_PROBABILITY: the chance that a round accepting nothing had a match).

Suffix decoding: on open chat, vLLM PR 24852 (MT-Bench, 80 prompts, one draft token) measured tau(1) = 1.62; the
curve is n-gram's chat curve with S_1 raised to 0.62 (the same c_2..). Elsewhere no measurement was found, and the
curve is n-gram's: a suffix tree holds the prompt, so it matches at least where prompt lookup does (a lower bound).

Usage: python scripts/derive_lookup_acceptance.py DATA_DIR  (prints the YAML block; paste it into the file)
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np

DOMAINS = {"chat": "sharegpt", "summarization": "cnn", "math": "gsm8k", "code_editing": "instructcoder"}
MATCH_GIVEN_NONE = {"sharegpt": 0.2, "cnn": 0.4, "gsm8k": 0.2, "instructcoder": 0.8}  # SpecDecode-Bench's simulator.py
MAX_GAMMA = 16
SUFFIX_CHAT_S1 = 0.62  # vLLM PR 24852: 1,226 accepted of 1,986 drafts at one draft token


def replay_tau(acc_lens: list[list[int]], gamma: int) -> float:
    """Mean tokens emitted per round of ``gamma`` drafts, pooled over rounds."""
    emitted, rounds = 0, 0
    for acc in acc_lens:
        p = 0
        while p < len(acc):
            accepted = min(acc[p] - 1, gamma)
            emitted += accepted + 1
            rounds += 1
            p += accepted + 1
    return emitted / rounds


def lookup_curve(acc_lens: list[list[int]], match_given_none: float) -> tuple[float, np.ndarray, np.ndarray]:
    """(m, c_1..c_16, tau(1..16)) of one domain."""
    tau = np.array([replay_tau(acc_lens, g) for g in range(1, MAX_GAMMA + 1)])
    survival = np.diff(np.concatenate([[1.0], tau]))
    survival = np.minimum.accumulate(np.maximum(survival, 1e-6))  # never rising (replays are concave in gamma)
    match = survival[0] + match_given_none * (1.0 - survival[0])
    conditional = survival / np.concatenate([[match], survival[:-1]])
    return match, conditional, tau


def _data_file(data_dir: Path, dataset: str) -> Path:
    """The repository's name for a dataset's file, or the bare dataset name."""
    named = data_dir / f"combined_{dataset}.jsonl"
    return named if named.is_file() else data_dir / f"{dataset}.jsonl"


def main(data_dir: Path) -> None:
    print("ngram:")
    chat = None
    for domain, dataset in DOMAINS.items():
        acc_lens = [json.loads(line)["acc_ngram"]["acc_len"] for line in open(_data_file(data_dir, dataset))]
        match, conditional, tau = lookup_curve(acc_lens, MATCH_GIVEN_NONE[dataset])
        if domain == "chat":
            chat = (match, conditional)
        print(f"  {domain}:  # {dataset}, {len(acc_lens)} requests; replayed tau(1, 3, 5, 16) = "
              f"{tau[0]:.3f}, {tau[2]:.3f}, {tau[4]:.3f}, {tau[15]:.3f}")
        print(f"    match: {match:.4f}")
        print(f"    conditional: [{', '.join(f'{c:.4f}' for c in conditional)}]")
    match, conditional = chat
    s1 = SUFFIX_CHAT_S1
    suffix_match = s1 + MATCH_GIVEN_NONE["sharegpt"] * (1.0 - s1)
    suffix = conditional.copy()
    suffix[0] = s1 / suffix_match
    print("suffix chat:")
    print(f"    match: {suffix_match:.4f}")
    print(f"    conditional: [{', '.join(f'{c:.4f}' for c in suffix)}]")


if __name__ == "__main__":
    main(Path(sys.argv[1]))
