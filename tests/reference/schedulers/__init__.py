"""The schedulers' numpy reference: the survival-sorted path built by a full sort, and the policies walked over
it with numpy (the implementation simlab had before its compiled walks, kept here as the oracle they are tested
against bit for bit: tests/test_scheduler_kernels.py).

    from reference.schedulers import REFERENCE
    lengths = REFERENCE["hardware_aware"](inputs)                      # policy function, like the registry's
    draft_len, drafting, min_budget = PLAN_DRAFT(inputs, lag_steps=1, slo_tpot_ms=None)
"""

from . import adaptive, policies

REFERENCE = {
    "fixed": policies.fixed,
    "threshold": policies.threshold,
    "hardware_aware": policies.hardware_aware,
    "async_topk": policies.async_topk,
    "goodput": policies.goodput,
    "adaptive": adaptive.verify,
    "oracle": policies.oracle,
    "retrospective": policies.retrospective,
}
PLAN_DRAFT = adaptive.plan_draft
