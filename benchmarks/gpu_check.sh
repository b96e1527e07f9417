#!/usr/bin/env bash
# One command that checks elegantpod's GPU paths on a CUDA machine without network, in at
# most 9 minutes, and leaves one JSON file per step in $OUT (default
# /tmp/elegantpod-gpu-check): 1_versions, 2_gpu_tests, 3_probe, 4_pods, 5_frontier,
# 6_tournament, 7_mjx. Each step runs in its own process under its own time budget
# (benchmarks/gpu_check_steps.py says what each measures) and writes its JSON even when
# it fails or is killed (status + error); a step that fails does not stop the next.
#
# It installs the wheels carried in .whl/ (git-ignored; benchmarks/gpu_wheels.sh fills it
# on a machine with the registries) that the machine lacks, and only those, into
# /tmp/site with --no-deps: a carried copy of what the machine has (its pytest and
# plugins) would shadow it. Then it imports what the steps need and stops at once, exit 3,
# naming what is missing, rather than spend the lease on steps that would all fail.
# Each step's budget and every wait inside it come from PLAN in gpu_check_steps.py, which
# tests/test_gpu_check.py sums at the GPU sizes. gpu_frontier.py's peer (PureJaxRL) is
# used where gpu_run.sh would find it, else its rows read "unavailable" and the step says
# that its target was not evaluated.
#
#     bash benchmarks/gpu_check.sh            # on the GPU machine: the real figures
#     bash benchmarks/gpu_check.sh --dry-run  # any machine: every step at toy sizes on
#                                             # the CPU, in this Python ($PYTHON or
#                                             # python3), no install; seconds per step
set -uo pipefail

cd "$(dirname "$0")/.."
dry=0
if [[ "${1:-}" == "--dry-run" ]]; then
    dry=1
elif [[ $# -gt 0 ]]; then
    echo "usage: bash benchmarks/gpu_check.sh [--dry-run]" >&2
    exit 2
fi
out_dir="${OUT:-/tmp/elegantpod-gpu-check}"
py="${PYTHON:-python3}"
mkdir -p "$out_dir"
start=$SECONDS
total=520 # 8 min 40 s (TOTAL_SECONDS in gpu_check_steps.py): setup, steps, kill grace

if [[ $dry -eq 0 ]]; then
    if ls .whl/*.whl >/dev/null 2>&1; then
        site=/tmp/site
        # the wheels whose distribution this Python lacks; the others are left out
        mapfile -t lacking < <("$py" - <<'EOF'
import glob, importlib.metadata as md, os, re, sys
for wheel in sorted(glob.glob(".whl/*.whl")):
    name = re.split(r"-[0-9]", os.path.basename(wheel), maxsplit=1)[0]
    try:
        md.version(name)
        print(f"gpu_check.sh: {name} is on this machine; its wheel is left out", file=sys.stderr)
    except md.PackageNotFoundError:
        print(wheel)
EOF
        )
        if ((${#lacking[@]} > 0)) && ! "$py" -m pip install -q --no-index --no-deps \
            --no-compile --no-cache-dir --upgrade --target "$site" "${lacking[@]}"; then
            echo "gpu_check.sh: pip failed; extracting the wheels instead" >&2
            "$py" -c 'import sys, zipfile
for w in sys.argv[2:]:
    zipfile.ZipFile(w).extractall(sys.argv[1])' "$site" "${lacking[@]}"
        fi
        export PYTHONPATH="$PWD:$site"
    else
        echo "gpu_check.sh: no wheels in .whl/; using this Python's packages" >&2
        export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
    fi
    # one JAX compile cache and Inductor cache for all steps' processes
    export TORCHINDUCTOR_CACHE_DIR="${TORCHINDUCTOR_CACHE_DIR:-/tmp/elegantpod-inductor}"
    flag=()
else
    export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
    export CUDA_VISIBLE_DEVICES="" # toy sizes on the CPU even on a GPU machine
    flag=(--dry-run)
fi
if ! "$py" benchmarks/gpu_check_steps.py check-imports; then
    echo "gpu_check.sh: a module every step needs is missing (above): stopped" >&2
    exit 3
fi
read -r -a budgets < <("$py" benchmarks/gpu_check_steps.py budgets ${flag[@]+"${flag[@]}"})
export PYTHONUNBUFFERED=1 OMP_NUM_THREADS="${OMP_NUM_THREADS:-1}"

steps=(versions gpu_tests probe pods frontier tournament mjx)
run_step() { # index name budget
    local json="$out_dir/$(($1 + 1))_$2.json" log="$out_dir/$(($1 + 1))_$2.log" rc
    timeout -k 10 "$3" "$py" benchmarks/gpu_check_steps.py "$2" --out "$json" \
        --budget "$3" ${flag[@]+"${flag[@]}"} >"$log" 2>&1
    rc=$?
    tail -n 3 "$log"
    "$py" benchmarks/gpu_check_steps.py fallback --out "$json" --rc "$rc" --log "$log" \
        ${flag[@]+"${flag[@]}"} || echo "gpu_check.sh: could not write $json" >&2
}
for i in "${!steps[@]}"; do
    name="${steps[$i]}"
    left=$((total - (SECONDS - start)))
    budget=${budgets[$i]}
    ((budget > left)) && budget=$left
    if ((budget < 10)); then # out of time (MJX comes last: "if time is left")
        "$py" benchmarks/gpu_check_steps.py fallback --out "$out_dir/$((i + 1))_$name.json" \
            --rc 124 --status "skipped: no time left" ${flag[@]+"${flag[@]}"}
        echo "$name: skipped, $left s left"
        continue
    fi
    echo "== $((i + 1))/${#steps[@]} $name (budget ${budget} s)"
    if [[ $dry -eq 1 ]]; then
        # toy sizes whose figures mean nothing: the steps overlap, to check every code
        # path in well under a minute; on the GPU they run one after the other
        run_step "$i" "$name" "$budget" &
    else
        run_step "$i" "$name" "$budget"
    fi
done
wait
echo "gpu_check.sh: done in $((SECONDS - start)) s; JSON in $out_dir"
"$py" - "$out_dir" <<'EOF'
import json, pathlib, sys
for path in sorted(pathlib.Path(sys.argv[1]).glob("[0-9]_*.json")):
    r = json.loads(path.read_text())
    print(f"{path.name:20} {r.get('status')!s:28} {str(r.get('error') or '')[:80]}")
EOF
exit 0
