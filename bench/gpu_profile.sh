#!/usr/bin/env bash
# Issue 37's profile, in one device call (see bench/gpu_profile.py for the steps):
#   bash bench/gpu_profile.sh          # on the GPU machine, from the repository root
# Carried wheels in .whl/ (xgboost-cu13 for its histogram kernel) are installed first; the
# records land in $OUT as each step ends (session.log, ab.json, ncu_*.csv,
# profile_summary.{json,md}). Under 10 minutes at 10M x 100 on an H100 is the plan, not a
# measurement: give the call timeout_s=600 and read session.log if it ends early.
set -u
cd "$(dirname "$0")/.." || exit 1
OUT="${OUT:-/tmp/gpufs_profile_out}"
mkdir -p "$OUT"
SITE=""
if ls .whl/*.whl >/dev/null 2>&1; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
    --target /tmp/gpufs-site .whl/*.whl && SITE=/tmp/gpufs-site
fi
NCU="$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | tail -1)"
export PYTHONUNBUFFERED=1
exec python3 bench/gpu_profile.py --out "$OUT" --ncu "${NCU:-ncu}" ${SITE:+--site "$SITE"} "$@"
