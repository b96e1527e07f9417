#!/usr/bin/env bash
# Fill .whl/ (git-ignored) with the wheels benchmarks/gpu_check.sh needs on the GPU machine,
# which has no network: run this where PyPI is reachable, then carry .whl/ along
# (device tool: carry [".whl", "benchmarks/peer"]). The list is benchmarks/gpu_wheels.txt
# (what that machine lacks: Python 3.12, x86_64); --no-deps, since the machine has the rest
# and a carried copy of what it has would shadow it (gpu_check.sh installs only what is
# missing).
#
#     bash benchmarks/gpu_wheels.sh           # -> .whl/, and its size (the carry limit is 64 MiB)
#     bash benchmarks/gpu_wheels.sh --peer    # also PureJaxRL's (benchmarks/gpu_wheels_peer.txt),
#                                             # and its folder copied to benchmarks/peer/purejaxrl
set -euo pipefail
cd "$(dirname "$0")/.."
py="${PYTHON:-python3}"
lists=(benchmarks/gpu_wheels.txt)
if [[ "${1:-}" == "--peer" ]]; then
    lists+=(benchmarks/gpu_wheels_peer.txt)
    peer=../shared/gpu-peer/purejaxrl # PureJaxRL's ppo.py and wrappers.py (commit 31756b1)
    if [[ -f "$peer/ppo.py" ]]; then
        mkdir -p benchmarks/peer # git-ignored; carried
        cp -r "$peer" benchmarks/peer/
    else
        echo "gpu_wheels.sh: $peer not found: copy PureJaxRL to benchmarks/peer/purejaxrl" >&2
    fi
elif [[ $# -gt 0 ]]; then
    echo "usage: bash benchmarks/gpu_wheels.sh [--peer]" >&2
    exit 2
fi
mkdir -p .whl
for list in "${lists[@]}"; do
    "$py" -m pip download --quiet --no-deps --only-binary=:all: --dest .whl \
        --python-version 3.12 --implementation cp --abi cp312 \
        --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 \
        --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 --platform any \
        -r "$list"
done
ls .whl/*.whl | wc -l | xargs echo "gpu_wheels.sh: wheels in .whl/:"
du -sh .whl | cut -f1 | xargs echo "gpu_wheels.sh: size (carry limit 64 MiB, the tree included):"
