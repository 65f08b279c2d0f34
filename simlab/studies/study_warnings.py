"""What a reader must know before acting on a study page, in one place for every page (plan, sweep, what-if):
where the gain check (hw_profiles/calibration/gain_error.yaml, :mod:`simlab.calibration.gain_check`) states
speculation's gain wrong against public runs for the target's class (dense or a mixture of experts), and that a
mixture-of-experts target rests on the MoE calibration (docs/calibration.md)."""

from __future__ import annotations

from typing import Iterable, Optional

WRONG_GAIN_ERROR = 0.10  # a held-out band whose median |gain error| is above this, or ...
WRONG_GAIN_SIGNS = 0.8  # ... whose signs agree in fewer than this share of the clear pairs, is stated wrong


def gain_summary() -> list[dict]:
    """The gain check's summary (hw_profiles/calibration/gain_error.yaml): held-out error per target and users."""
    import yaml

    from simlab.calibration.gain_check import GAIN_FILE
    from simlab.common.resources import shipped_dir

    path = shipped_dir("hw_profiles") / "calibration" / GAIN_FILE
    try:
        return list((yaml.safe_load(path.read_text(encoding="utf-8")) or {}).get("summary") or [])
    except OSError:
        return []


def is_moe_model(model: Optional[str]) -> Optional[bool]:
    """Whether ``model`` (a catalogue name) is a mixture of experts; None for a name the catalogue lacks."""
    from simlab.common.errors import InputError
    from simlab.hardware.specs import get_model

    if not model:
        return None
    try:
        return bool(get_model(model).is_moe)
    except InputError:
        return None


def gain_caution(moe: bool) -> Optional[str]:
    """The caution for a study with speculation on a target of this class, where the gain check states its gain
    wrong (None where the held-out bands are within :data:`WRONG_GAIN_ERROR` and agree in sign)."""
    target = "moe" if moe else "dense"
    rows = [r for r in gain_summary() if r.get("role") == "held out" and r.get("target") == target]
    if not any(r["median_abs_error"] > WRONG_GAIN_ERROR or r["signs_agree"] < WRONG_GAIN_SIGNS * r["signs_clear"]
               for r in rows):
        return None
    bands = "; ".join(f"{r['users']} user{'s' if str(r['users']) != '1' else ''}: median error "
                      f"{r['median_abs_error']:.0%}, signs right in {r['signs_agree']} of {r['signs_clear']}"
                      for r in rows)
    kind = "a mixture of experts" if moe else "a dense target"
    return (f"speculation's gain on {kind} is stated wrong against public runs ({bands}; "
            "hw_profiles/calibration/gain_error.yaml): read what speculation gains or saves here as an upper bound.")


def moe_notice(models: Iterable[str]) -> Optional[str]:
    """The note a page on a mixture-of-experts target opens with."""
    moe = [m for m in dict.fromkeys(models) if is_moe_model(m)]
    if not moe:
        return None
    return (f"{', '.join(moe)} {'is a mixture' if len(moe) == 1 else 'are mixtures'} of experts: its step costs rest "
            "on the MoE latency calibration (docs/calibration.md), whose stated error is larger than the dense "
            "models'.")


def study_warnings(settings: list[dict], arm_kinds: dict[str, dict]) -> list[str]:
    """A sweep's or what-if's cautions: the MoE notice, and the gain caution where an arm speculates."""
    models = [s.get("model") for s in settings if s.get("model")]
    out = [n for n in (moe_notice(models),) if n]
    if any((k or {}).get("method") not in (None, "none") for k in arm_kinds.values()):
        classes = {is_moe_model(m) for m in models} - {None}
        out += [c for c in (gain_caution(moe) for moe in sorted(classes)) if c]
    return out
