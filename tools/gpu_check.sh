#!/usr/bin/env bash
# The prepared GPU check: one run on one CUDA GPU, under 8 minutes, whose
# output file goes into docs/benchmarks.md as it is. Parts, each under its own time budget
# (`timeout`; a part that runs past it is stopped and reported, the others still run):
#
#   sync      tests/cuda/test_cuda_sync.py: training steps of BCE, CD-GTMLL and C-Tran under
#             torch.cuda.set_sync_debug_mode("error"), tabular and images (120 s)
#   cuda      the other CUDA tests, tests/cuda/ (105 s)
#   finetune  benchmarks/bench_finetune_amp.py: ResNet-50 fine-tuning img/s at 448 px, bf16 and
#             fp32, the model step alone, training / model step, peak GPU memory (150 s)
#   tabular   benchmarks/bench_tabular_throughput.py: rows/s of the trainer's epoch loop and of
#             the model step alone, BCE and CD-GTMLL on Yeast and Delicious, peak memory (75 s)
#
# The output starts with the date, host, GPU, driver, torch and CUDA versions, commit and load,
# and ends with each part's status and seconds.
#
#   tools/gpu_check.sh [--out FILE] [--parts sync,cuda,finetune,tabular] [--dry-run] [--help]
#
# --out       where the output goes (default gpu_check-<UTC date and time>.txt in the current
#             directory); it is also printed
# --parts     a comma-separated subset of the parts, run in the order above
# --dry-run   print the header lines that need no GPU and each part's command and budget; run nothing
#
# Exit status: 0 when every part passed, 1 when one failed or ran out of time, 2 for bad
# arguments, 3 when torch sees no CUDA GPU (the header is written, nothing else runs).
#
# Environment: PYTHON (default: python), CDGTMLL_DATA_MIRROR (the dataset mirror; Yeast and
# Delicious are read from it), WORKERS (DataLoader workers of the fine-tuning benchmark,
# default 14: the earlier H200 measurement's).
set -uo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
PYTHON="${PYTHON:-python}"
WORKERS="${WORKERS:-14}"
ALL_PARTS=(sync cuda finetune tabular)
declare -A BUDGET=([sync]=120 [cuda]=105 [finetune]=150 [tabular]=75)
declare -A CMD=(
  [sync]="$PYTHON -m pytest -q -p no:cacheprovider -rs tests/cuda/test_cuda_sync.py"
  [cuda]="$PYTHON -m pytest -q -p no:cacheprovider -rs tests/cuda --ignore=tests/cuda/test_cuda_sync.py"
  [finetune]="$PYTHON benchmarks/bench_finetune_amp.py --device cuda --images 1024 --size 448 --batch 64 --workers $WORKERS --epochs 2 --modes off,bf16 --smooth"
  [tabular]="$PYTHON benchmarks/bench_tabular_throughput.py --device cuda --datasets yeast,delicious --methods BCE,CD-GTMLL --epochs 3"
)

usage() { sed -n '2,/^set -uo/p' "${BASH_SOURCE[0]}" | sed '$d' | sed 's/^# \{0,1\}//'; }

OUT="gpu_check-$(date -u +%Y%m%dT%H%M%SZ).txt"
PARTS="$(IFS=,; echo "${ALL_PARTS[*]}")"
DRY=0
while [ $# -gt 0 ]; do
  case "$1" in
    -h|--help) usage; exit 0 ;;
    --dry-run) DRY=1 ;;
    --out) [ $# -ge 2 ] || { echo "gpu_check.sh: --out needs a file name" >&2; exit 2; }; OUT="$2"; shift ;;
    --out=*) OUT="${1#--out=}" ;;
    --parts) [ $# -ge 2 ] || { echo "gpu_check.sh: --parts needs a list" >&2; exit 2; }; PARTS="$2"; shift ;;
    --parts=*) PARTS="${1#--parts=}" ;;
    *) echo "gpu_check.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
  shift
done

SELECTED=()
IFS=',' read -r -a WANTED <<< "$PARTS"
for w in "${WANTED[@]}"; do
  [ -n "${BUDGET[$w]:-}" ] || { echo "gpu_check.sh: unknown part '$w' (parts: ${ALL_PARTS[*]})" >&2; exit 2; }
done
for p in "${ALL_PARTS[@]}"; do
  for w in "${WANTED[@]}"; do [ "$p" = "$w" ] && SELECTED+=("$p"); done
done
TOTAL=0
for p in "${SELECTED[@]}"; do TOTAL=$((TOTAL + BUDGET[$p])); done

cd "$ROOT" || exit 2
export PYTHONPATH="$ROOT/src${PYTHONPATH:+:$PYTHONPATH}"

if [ "$DRY" = 1 ]; then
  echo "# gpu_check dry run: $(date -u +%Y-%m-%dT%H:%M:%SZ), $(hostname), commit $(git rev-parse --short HEAD 2>/dev/null || echo '?')"
  echo "# output would go to $OUT; parts ${SELECTED[*]}; budgets add up to ${TOTAL} s"
  for p in "${SELECTED[@]}"; do
    echo "[$p] timeout ${BUDGET[$p]}s: ${CMD[$p]}"
  done
  exit 0
fi

exec > >(tee "$OUT") 2>&1
echo "# gpu_check $(date -u +%Y-%m-%dT%H:%M:%SZ) on $(hostname), commit $(git rev-parse --short HEAD 2>/dev/null || echo '?')$(git diff --quiet 2>/dev/null || echo ' (dirty)')"
echo "# load average: $(cut -d' ' -f1-3 /proc/loadavg 2>/dev/null || uptime)"
echo "# GPU: $(nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader 2>/dev/null | head -1 || echo 'nvidia-smi not found')"
echo "# $($PYTHON -c 'import torch; print(f"torch {torch.__version__}, CUDA {torch.version.cuda}, cuDNN {torch.backends.cudnn.version()}, GPU available: {torch.cuda.is_available()}")' 2>&1 | tail -1)"
echo "# parts: ${SELECTED[*]} (budgets add up to ${TOTAL} s)"
if ! $PYTHON -c 'import sys, torch; sys.exit(0 if torch.cuda.is_available() else 1)' 2>/dev/null; then
  echo "# no CUDA GPU visible to torch: nothing checked (the CUDA tests would only skip)"
  exit 3
fi

declare -A STATUS SECONDS_TAKEN
FAILED=0
for p in "${SELECTED[@]}"; do
  echo
  echo "## [$p] ${CMD[$p]}  (budget ${BUDGET[$p]} s; load $(cut -d' ' -f1 /proc/loadavg 2>/dev/null))"
  t0=$(date +%s)
  # shellcheck disable=SC2086  # the command is a word list on purpose
  timeout --signal=TERM --kill-after=10 "${BUDGET[$p]}" ${CMD[$p]}
  rc=$?
  SECONDS_TAKEN[$p]=$(( $(date +%s) - t0 ))
  case $rc in
    0) STATUS[$p]="ok" ;;
    124|137) STATUS[$p]="TIMED OUT"; FAILED=1 ;;
    *) STATUS[$p]="FAILED (exit $rc)"; FAILED=1 ;;
  esac
  echo "## [$p] ${STATUS[$p]} after ${SECONDS_TAKEN[$p]} s"
done
echo
echo "# summary ($(date -u +%Y-%m-%dT%H:%M:%SZ), load $(cut -d' ' -f1-3 /proc/loadavg 2>/dev/null)):"
for p in "${SELECTED[@]}"; do echo "#   $p: ${STATUS[$p]}, ${SECONDS_TAKEN[$p]} s of ${BUDGET[$p]} s"; done
exit $FAILED
