#!/usr/bin/env bash
# One command for a CUDA machine without network: run a GPU benchmark there
# (benchmarks/gpu_throughput.py by default; name another as the first argument, e.g.
# gpu_tournament.py, whose GPU workers are elegantpod's own GPUCluster: no dask-cuda).
# gpu_frontier.py (ours vs PureJaxRL) also needs the peer's wheels in .whl/ (gymnax 0.0.9,
# distrax 0.1.9, tfp-nightly, dm-tree, gast, decorator, ...: benchmarks/gpu_wheels_peer.txt;
# jax is on the machine) and the peer's folder inside the repo (shared/gpu-peer/purejaxrl
# or benchmarks/peer/purejaxrl, or --peer-dir): `bash benchmarks/gpu_wheels.sh --peer`.
#
# That machine has python3, torch (CUDA), numpy and pandas but neither gymnasium nor
# dask/distributed, which `import elegantpod` needs; so the wheels of those (the same
# versions as the dev venv, collected in .whl/ at the repo root, git-ignored) travel with
# the working tree and are installed into /tmp/site here. bokeh is not imported by
# `import elegantpod`, so it does not travel.
#
# Usage (from the repo root; extra arguments go to the benchmark, later ones win):
#     bash benchmarks/gpu_run.sh [SCRIPT.py] [--seconds 1 ...]
# The JSON goes to $OUT/<benchmark>.json ($OUT defaults to /tmp/elegantpod-bench).
set -euo pipefail

cd "$(dirname "$0")/.."
out_dir="${OUT:-/tmp/elegantpod-bench}"
site=/tmp/site

if ! ls .whl/*.whl >/dev/null 2>&1; then
    echo "gpu_run.sh: no wheels in .whl/ (carry it along)" >&2
    exit 2
fi
# pip when there is one; a wheel is a zip, so plain extraction is the fallback.
if ! python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
    --target "$site" .whl/*.whl; then
    echo "gpu_run.sh: pip failed; extracting the wheels instead" >&2
    python3 -c 'import glob, sys, zipfile
for w in sorted(glob.glob(".whl/*.whl")):
    zipfile.ZipFile(w).extractall(sys.argv[1])' "$site"
fi
export PYTHONPATH="$site:$PWD"

nvidia-smi -L || echo "gpu_run.sh: nvidia-smi not available" >&2
# The dependencies the wheels expect the machine to provide (installed with --no-deps).
python3 -c 'import importlib.metadata as m
names = "torch numpy cloudpickle toolz click fsspec msgpack psutil pyyaml jinja2 packaging".split()
def v(n):
    try:
        return m.version(n)
    except m.PackageNotFoundError:
        return "MISSING"
print("python", __import__("sys").version.split()[0], *(f"{n}={v(n)}" for n in names))' || true

mkdir -p "$out_dir"
if [[ "${1:-}" == *.py ]]; then
    script="$1"
    shift
    name="${script%.py}"
    PYTHONUNBUFFERED=1 python3 "benchmarks/$script" --out "$out_dir/$name.json" "$@"
else
    PYTHONUNBUFFERED=1 python3 benchmarks/gpu_throughput.py \
        --out "$out_dir/gpu_throughput.json" --budget 270 "$@"
fi
