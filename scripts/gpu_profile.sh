#!/usr/bin/env bash
# Measure a bf16, random-weight Qwen3-8B-shaped target with a 5-layer DSpark drafter on one GPU and write
# hw_profiles/h200_qwen3-8b_measured.yaml. Fits in 8 minutes on one H200: 360 s of measuring (the profiler's
# time guard skips points that would not fit and lists them in the file), start-up and a check on top, and a
# hard stop at 450 s. See docs/profiling.md.
#
#   scripts/gpu_profile.sh                 # on the GPU
#   scripts/gpu_profile.sh --dry-run       # the same pipeline on CPU with the tiny model (seconds; no GPU needed)
#   scripts/gpu_profile.sh --estimate      # print the estimated H200 time of the grid and stop
#   scripts/gpu_profile.sh --out FILE      # write elsewhere;  --budget-s S  changes the measuring budget
#   SIMLAB_PROFILE_HARD_LIMIT_S=600 scripts/gpu_profile.sh   # the hard stop (default 450 s; 120 s for a dry run)
#
# Progress goes to stderr, one line per phase. The profile is rewritten (atomically) after every phase, so a
# stopped run leaves the phases done so far, marked `provenance.complete: false`.
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.." || exit 1

# the interpreter: $PYTHON if given, else the active virtual environment's, else the checkout's .venv, else python3
if [[ -z "${PYTHON:-}" ]]; then
    if [[ -n "${VIRTUAL_ENV:-}" && -x "${VIRTUAL_ENV}/bin/python" ]]; then PYTHON="${VIRTUAL_ENV}/bin/python"
    elif [[ -x .venv/bin/python ]]; then PYTHON=.venv/bin/python
    else PYTHON=python3; fi
fi
echo "gpu_profile: python ${PYTHON}" >&2
export OMP_WAIT_POLICY="${OMP_WAIT_POLICY:-PASSIVE}" PYTHONUNBUFFERED=1

dry_run=0
for arg in "$@"; do
    case "$arg" in
        --dry-run) dry_run=1 ;;
        -h|--help) exec "$PYTHON" scripts/gpu_profile.py --help ;;
    esac
done
default_limit=450
[[ $dry_run == 1 ]] && default_limit=120
limit="${SIMLAB_PROFILE_HARD_LIMIT_S:-$default_limit}"

if [[ $dry_run == 0 ]] && command -v nvidia-smi >/dev/null 2>&1; then
    nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader >&2 || true
fi

started=$(date +%s)
if command -v timeout >/dev/null 2>&1; then
    timeout --kill-after=15 "$limit" "$PYTHON" scripts/gpu_profile.py "$@"
else
    echo "gpu_profile: no timeout(1) here; relying on the profiler's time guard alone" >&2
    "$PYTHON" scripts/gpu_profile.py "$@"
fi
rc=$?
elapsed=$(( $(date +%s) - started ))

case $rc in
    0) echo "gpu_profile: done in ${elapsed} s" >&2 ;;
    2) echo "gpu_profile: bad input or no usable GPU (exit 2, see the message above); nothing measured" >&2 ;;
    124|137) echo "gpu_profile: stopped by the ${limit} s hard limit after ${elapsed} s; the profile holds the" \
                  "phases finished before (provenance.complete: false)" >&2 ;;
    *) echo "gpu_profile: failed with exit ${rc} after ${elapsed} s; any profile written holds the phases" \
            "finished before the failure" >&2 ;;
esac
exit $rc
