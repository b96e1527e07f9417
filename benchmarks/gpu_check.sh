#!/usr/bin/env bash
# elegantpod's GPU check in two parts, one device-tool call each (benchmarks/README.md,
# "gpu_check.sh", gives the two calls exactly):
#
#     bash benchmarks/gpu_check.sh --part 1   # headline figures, about 3 minutes (cap 260 s)
#     bash benchmarks/gpu_check.sh --part 2   # the rest, about 5 minutes (cap 330 s)
#     bash benchmarks/gpu_check.sh --part 2 --cap 260   # a smaller cap (a second start)
#     bash benchmarks/gpu_check.sh --dry-run [--part N]
#         # any machine: every item of both parts (or of part N) at toy sizes on the CPU,
#         # one after the other, in this Python ($PYTHON or python3), no install
#
# The items, their limits and their files are PARTS in benchmarks/gpu_check_steps.py,
# which runs them one at a time, each under `timeout -k 5 LIMIT` (the lesser of its limit
# and what the part's cap leaves; skipped when under 60% of its limit is left). Each item
# leaves its JSON in $OUT (default /tmp/elegantpod-gpu-check) as soon as it exists, all
# output goes to one $OUT/log.txt (trimmed to 4 MB), at most 6 files in all, and every
# figure is printed as a `FIGURE name value` line after its item and again in a closing
# FIGURES block: the device tool's output tail carries the numbers even if no file comes
# back.
#
# Nothing it starts may outlive it or change the GPU: every process stays in this
# command's session (no daemon, no session of its own), CUDA MPS is only reported, one
# Inductor compile thread per process (each compiling process otherwise forks
# min(32, cores) compile workers: about 160 processes for the tournament's 8), and each
# nvidia-smi or NVML call has a time limit.
#
# Setup: the wheels carried in .whl/ (benchmarks/gpu_wheels.sh fills it on a machine with
# the registries) that this machine lacks, and only those, go into /tmp/site with
# --no-deps, once per machine (a marker skips it on a warm one); then torch must see a GPU
# and every module the items need must import, else it stops at once, exit 3, naming
# CUDA or the module, rather than spend the lease on items that would only say so.
set -uo pipefail

cd "$(dirname "$0")/.."
usage="usage: bash benchmarks/gpu_check.sh --part 1|2 [--cap SECONDS] | --dry-run [--part 1|2]"
dry=0
parts=()
cap=()
while (($# > 0)); do
    case "$1" in
        --dry-run) dry=1 ;;
        --part)
            [[ "${2:-}" == 1 || "${2:-}" == 2 ]] || { echo "$usage" >&2; exit 2; }
            parts+=("$2")
            shift
            ;;
        --cap)
            [[ "${2:-}" =~ ^[0-9]+$ ]] || { echo "$usage" >&2; exit 2; }
            cap=(--cap "$2")
            shift
            ;;
        *) echo "$usage" >&2; exit 2 ;;
    esac
    shift
done
if ((${#parts[@]} == 0)); then
    ((dry == 1)) || { echo "$usage" >&2; exit 2; }
    parts=(1 2)
fi
out_dir="${OUT:-/tmp/elegantpod-gpu-check}"
py="${PYTHON:-python3}"
wheels="${GPU_CHECK_WHEELS:-.whl}" # tests point this at an empty folder
mkdir -p "$out_dir"
log="$out_dir/log.txt"
start=$SECONDS
say() {
    echo "gpu_check.sh: $*"
    echo "gpu_check.sh: $*" >>"$log"
}
# one compile thread, one OpenMP thread, JAX beside torch without taking the GPU's memory
export TORCHINDUCTOR_COMPILE_THREADS=1 OMP_NUM_THREADS=1
export XLA_PYTHON_CLIENT_PREALLOCATE=false PYTHONUNBUFFERED=1

if ((dry == 0)); then
    export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
    if ls "$wheels"/*.whl >/dev/null 2>&1; then
        site=/tmp/site
        stamp=$(ls -l "$wheels"/*.whl | sha1sum | cut -c1-40)
        if [[ -f "$site/.done" && "$(cat "$site/.done")" == "$stamp" ]]; then
            say "the wheels were installed by an earlier call (a warm machine): not again"
        else
            # the wheels whose distribution this Python lacks; the others are left out
            mapfile -t lacking < <(timeout -k 5 60 "$py" - "$wheels" 2>>"$log" <<'EOF'
import glob, importlib.metadata as md, os, re, sys
for wheel in sorted(glob.glob(os.path.join(sys.argv[1], "*.whl"))):
    name = re.split(r"-[0-9]", os.path.basename(wheel), maxsplit=1)[0]
    try:
        md.version(name)
        print(f"gpu_check.sh: {name} is on this machine; its wheel is left out", file=sys.stderr)
    except md.PackageNotFoundError:
        print(wheel)
EOF
            )
            ok=1
            if ((${#lacking[@]} > 0)) && ! timeout -k 5 120 "$py" -m pip install -q \
                --no-index --no-deps --no-compile --no-cache-dir --upgrade --target "$site" \
                "${lacking[@]}" >>"$log" 2>&1; then
                say "pip failed; extracting the wheels instead"
                timeout -k 5 120 "$py" -c 'import sys, zipfile
for w in sys.argv[2:]:
    zipfile.ZipFile(w).extractall(sys.argv[1])' "$site" "${lacking[@]}" >>"$log" 2>&1 || ok=0
            fi
            ((ok == 1)) && mkdir -p "$site" && echo "$stamp" >"$site/.done"
            say "${#lacking[@]} wheels installed into $site in $((SECONDS - start)) s"
        fi
        export PYTHONPATH="$PWD:$site"
    else
        say "no wheels in $wheels/; using this Python's packages"
    fi
    # one Inductor cache for all items' processes
    export TORCHINDUCTOR_CACHE_DIR="${TORCHINDUCTOR_CACHE_DIR:-/tmp/elegantpod-inductor}"
    check=(--cuda)
    flag=()
else
    export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
    export CUDA_VISIBLE_DEVICES="" # toy sizes on the CPU even on a GPU machine
    check=()
    flag=(--dry-run)
fi
# torch must see a GPU (checked first), and every required module must import
report=$(timeout -k 5 90 "$py" benchmarks/gpu_check_steps.py check-imports \
    ${check[@]+"${check[@]}"} 2>&1)
rc=$?
echo "$report" >>"$log"
echo "$report" | grep -v '^$'
if ((rc != 0)); then
    ((rc == 124 || rc == 137)) && say "the CUDA and import check did not end in 90 s"
    say "stopped before any item (exit 3): see the line above naming CUDA or a module"
    exit 3
fi
say "setup done in $((SECONDS - start)) s"
"$py" benchmarks/gpu_check_steps.py part --part "${parts[@]}" --out-dir "$out_dir" \
    --elapsed $((SECONDS - start)) ${cap[@]+"${cap[@]}"} ${flag[@]+"${flag[@]}"}
rc=$?
if (($(stat -c %s "$log") > 4000000)); then # the device tool returns 16 MiB a file
    tail -c 4000000 "$log" >"$log.tmp" && mv "$log.tmp" "$log"
fi
echo "gpu_check.sh: done in $((SECONDS - start)) s, rc $rc; in $out_dir: $(ls "$out_dir" | tr '\n' ' ')"
exit "$rc"
