#!/usr/bin/env bash
# Every GPU check of takzero in one command (issue 55): the first thing to run on a GPU machine.
#
#   scripts/gpu_suite.sh                      # on the GPU machine: about 14 minutes (estimated)
#   scripts/gpu_suite.sh --device cpu         # the same steps on the CPU, small (under 10 minutes)
#   scripts/gpu_suite.sh --dry-run            # the steps, their commands and timeouts; runs nothing
#   OUT=/tmp/gs scripts/gpu_suite.sh --only network_6x6,make_batch
#
# Each step runs under its own `timeout`, so one failure or hang does not cost the others. Into
# $OUT (default ./gpu_suite_out; --out DIR) go <step>.jsonl (the step's JSON lines), <step>.err
# (its stderr), suite.jsonl (one line per step: rc, timed_out, seconds, lines, command; then a
# "suite" line) and all.jsonl (every JSON line of every step, with its "step" added). Steps:
#
#   environment     GPUs (nvidia-smi when present), torch, CUDA, CPUs, load average
#   check_gpu       scripts/check_gpu.py in full (every CUDA path: pass/fail, positions/s)
#   network_6x6     the shipped 6x6 network's shape (+config=6x6) by batch 64..4096, fp32 and
#   network_6x64    bf16 (scripts/bench_inference.py); then 6x64 and 10x128 trunks
#   network_10x128
#   selfplay_8      self-play positions/s of 8 and 16 worker processes at once, local inference
#   selfplay_16     (scripts/bench_pipeline.py --workers, +config=6x6_gpu: selfplay.pipeline on),
#   selfplay_8_plain  and of 8 with selfplay.pipeline=false (what the two halves gain)
#   selfplay_ray_8  self-play through Ray as a run starts it, 8 and 16 workers, local inference
#   selfplay_ray_16 and then selfplay.inference=server (scripts/gpu_suite_selfplay.py): positions/s
#                   and moves/s of each, the server's mean batch, the ratio server/local
#   make_batch      the trainer's batch making, samples/s, against the per-record path (CPU)
#   trainer         trainer samples/s, bf16 autocast, batch 256..2048 (+config=6x6_gpu)
#   run             python -m takzero.train +config=6x6_gpu for 5 minutes, nvidia-smi sampled
#                   every 5 s (run_gpu lines; skipped without nvidia-smi), the run's own summary
#                   (a run_summary line parsed from its train.log)
#
# With --device cpu (the short mode) the sizes are small (small networks and batches, 2 and 4
# workers instead of 8 and 16, a 2-minute run with a tiny network): it checks that every step
# works, not speed.
# A step's timeout can be changed with GPU_SUITE_TIMEOUT_<STEP> (seconds, e.g.
# GPU_SUITE_TIMEOUT_RUN=900); PYTHON picks the interpreter (default: python).
set -u

DEVICE=cuda
OUT_DIR=${OUT:-./gpu_suite_out}
DRY=0
ONLY=""
RUN_MINUTES=""
while [ $# -gt 0 ]; do
  case "$1" in
    --device) DEVICE=${2:?--device needs cuda or cpu}; shift 2 ;;
    --out) OUT_DIR=${2:?--out needs a folder}; shift 2 ;;
    --dry-run) DRY=1; shift ;;
    --only) ONLY=${2:?--only needs step names, comma-separated}; shift 2 ;;
    --run-minutes) RUN_MINUTES=${2:?--run-minutes needs a number}; shift 2 ;;
    -h|--help) sed -n '2,36p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "gpu_suite.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
done
case "$DEVICE" in
  cuda|cuda:[0-9]*|cpu) ;;
  *) echo "gpu_suite.sh: --device must be cuda, cuda:N or cpu, not '$DEVICE'" >&2; exit 2 ;;
esac
if [ -n "$RUN_MINUTES" ] && ! [[ "$RUN_MINUTES" =~ ^[0-9]+([.][0-9]+)?$ ]]; then
  echo "gpu_suite.sh: --run-minutes must be a positive number, not '$RUN_MINUTES'" >&2; exit 2
fi

case "$OUT_DIR" in /*) ;; *) OUT_DIR="$PWD/$OUT_DIR" ;; esac
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT" || exit 1
STAMP=$(date +%Y%m%d-%H%M%S)
PY=${PYTHON:-python}
STEPS=(environment check_gpu network_6x6 network_6x64 network_10x128 selfplay_8 selfplay_16 selfplay_8_plain
       selfplay_ray_8 selfplay_ray_16 make_batch trainer run)
if [ -n "$ONLY" ]; then
  for s in ${ONLY//,/ }; do
    [[ " ${STEPS[*]} " == *" $s "* ]] || { echo "gpu_suite.sh: no step '$s' (steps: ${STEPS[*]})" >&2; exit 2; }
  done
fi

if [ "$DEVICE" = cpu ]; then
  # small: every step's code path, not its speed
  CHECK_ARGS=(--device cpu --quick --config smoke)
  NET_ARGS=(--device cpu --batches 64 256 --min-time 0.2 --threads 1 --no-train)
  WORKERS=(2 4)
  SMALL=(device=cpu model.channels=16 model.blocks=1 selfplay.games_per_worker=16 mcts.simulations=16 mcts.gumbel_m=8)
  SP_SECONDS=8
  RAY_ARGS=(--seconds 8 --warmup-s 150)
  TRAIN_ARGS=(--seconds 10 --train-steps 2 --train-batches 256 512)
  MB_BATCHES=(256 1024)
  RUN_MINUTES=${RUN_MINUTES:-2}
  RUN_ARGS=(device=cpu selfplay.workers=1 selfplay.games_per_worker=8 selfplay.ply_limit=60 model.channels=16 model.blocks=1
            mcts.simulations=16 mcts.gumbel_m=8 replay.min_positions=300 train.batch_size=64
            train.checkpoint_every=20 ray.worker_gpu_share=0 evaluator.baseline_every=0
            evaluator.early_baseline_generation=0 evaluator.tactics_every=0)
  T=(30 420 240 120 420 150 200 150 300 360 60 200 0)
else
  CHECK_ARGS=(--device "$DEVICE" --seconds 1.5 --selfplay-seconds 10)
  NET_ARGS=(--device cuda --batches 64 128 256 512 1024 2048 4096 --min-time 0.25 --no-train)
  WORKERS=(8 16)
  SMALL=(device="$DEVICE")
  SP_SECONDS=15
  RAY_ARGS=(--seconds 10 --warmup-s 90)
  TRAIN_ARGS=(--seconds 10 --train-steps 10 --train-batches 256 512 1024 2048)
  MB_BATCHES=(256 1024 2048)
  RUN_MINUTES=${RUN_MINUTES:-5}
  RUN_ARGS=(device="$DEVICE")
  T=(30 300 120 120 150 150 180 150 240 240 60 180 0)
fi
# the run (the last step): its minutes, start-up and the final checkpoint and summary
T[${#STEPS[@]}-1]=$(awk -v m="$RUN_MINUTES" 'BEGIN { printf "%d", m * 60 + 240 }')
RUN_DIR="$OUT_DIR/runs"

command_of() {  # the command of step $1, one word per line
  case "$1" in
    environment) printf '%s\n' "$PY" scripts/gpu_suite_env.py ;;
    check_gpu) printf '%s\n' "$PY" scripts/check_gpu.py "${CHECK_ARGS[@]}" ;;
    network_6x6) printf '%s\n' "$PY" scripts/bench_inference.py --config 6x6 "${NET_ARGS[@]}" ;;
    network_6x64) printf '%s\n' "$PY" scripts/bench_inference.py --blocks 6 --channels 64 --no-evaluator "${NET_ARGS[@]}" ;;
    network_10x128) printf '%s\n' "$PY" scripts/bench_inference.py --blocks 10 --channels 128 --no-evaluator "${NET_ARGS[@]}" ;;
    selfplay_8) printf '%s\n' "$PY" scripts/bench_pipeline.py --config 6x6_gpu --workers "${WORKERS[0]}" --seconds "$SP_SECONDS" -- "${SMALL[@]}" ;;
    selfplay_16) printf '%s\n' "$PY" scripts/bench_pipeline.py --config 6x6_gpu --workers "${WORKERS[1]}" --seconds "$SP_SECONDS" -- "${SMALL[@]}" ;;
    selfplay_8_plain) printf '%s\n' "$PY" scripts/bench_pipeline.py --config 6x6_gpu --workers "${WORKERS[0]}" --seconds "$SP_SECONDS" -- "${SMALL[@]}" selfplay.pipeline=false ;;
    selfplay_ray_8) printf '%s\n' "$PY" scripts/gpu_suite_selfplay.py --config 6x6_gpu --workers "${WORKERS[0]}" "${RAY_ARGS[@]}" -- "${SMALL[@]}" ;;
    selfplay_ray_16) printf '%s\n' "$PY" scripts/gpu_suite_selfplay.py --config 6x6_gpu --workers "${WORKERS[1]}" "${RAY_ARGS[@]}" -- "${SMALL[@]}" ;;
    make_batch) printf '%s\n' "$PY" scripts/bench_pipeline.py --config 6x6_gpu --make-batch-only --seconds 2 --batches "${MB_BATCHES[@]}" ;;
    trainer) printf '%s\n' "$PY" scripts/bench_pipeline.py --config 6x6_gpu "${TRAIN_ARGS[@]}" -- "${SMALL[@]}" ;;
    run) printf '%s\n' "$PY" scripts/gpu_suite_run.py --out "$OUT_DIR" --minutes "$RUN_MINUTES" -- \
           +config=6x6_gpu "checkpoint_root=$RUN_DIR" "run_name=gpu_suite-$STAMP" "${RUN_ARGS[@]}" ;;
  esac
}

timeout_of() {  # seconds of step $1: GPU_SUITE_TIMEOUT_<STEP> or the table above
  local i var
  for i in "${!STEPS[@]}"; do
    if [ "${STEPS[$i]}" = "$1" ]; then
      var="GPU_SUITE_TIMEOUT_$(echo "$1" | tr '[:lower:]' '[:upper:]')"
      echo "${!var:-${T[$i]}}"
      return
    fi
  done
}

json_str() {  # $1 as a JSON string
  "$PY" -c 'import json, sys; print(json.dumps(sys.argv[1]))' "$1"
}

wanted() {
  [ -z "$ONLY" ] || [[ ",$ONLY," == *",$1,"* ]]
}

if [ "$DRY" = 1 ]; then
  for s in "${STEPS[@]}"; do
    wanted "$s" || continue
    mapfile -t cmd < <(command_of "$s")
    echo "{\"step\": \"$s\", \"timeout_s\": $(timeout_of "$s"), \"command\": $(json_str "${cmd[*]}"), \"dry_run\": true}"
  done
  exit 0
fi

mkdir -p "$OUT_DIR" || exit 1
: > "$OUT_DIR/suite.jsonl"
START=$(date +%s)
FAILED=()
for s in "${STEPS[@]}"; do
  wanted "$s" || continue
  mapfile -t cmd < <(command_of "$s")
  limit=$(timeout_of "$s")
  echo "[gpu_suite] $s (timeout ${limit} s): ${cmd[*]}" >&2
  t0=$(date +%s.%N)
  timeout --kill-after=20 "$limit" "${cmd[@]}" > "$OUT_DIR/$s.jsonl" 2> "$OUT_DIR/$s.err"
  rc=$?
  secs=$(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }')
  lines=$(grep -c '^{' "$OUT_DIR/$s.jsonl")
  timed_out=false
  { [ "$rc" = 124 ] || [ "$rc" = 137 ]; } && timed_out=true
  [ "$rc" = 0 ] || FAILED+=("$s")
  line="{\"step\": \"$s\", \"rc\": $rc, \"timed_out\": $timed_out, \"seconds\": $secs, \"lines\": $lines, \"timeout_s\": $limit, \"command\": $(json_str "${cmd[*]}")}"
  echo "$line" >> "$OUT_DIR/suite.jsonl"
  echo "$line"
done
failed_json=$("$PY" -c 'import json, sys; print(json.dumps(sys.argv[1:]))' "${FAILED[@]+"${FAILED[@]}"}")
line="{\"step\": \"suite\", \"device\": \"$DEVICE\", \"seconds\": $(( $(date +%s) - START )), \"failed\": $failed_json, \"out\": $(json_str "$OUT_DIR")}"
echo "$line" >> "$OUT_DIR/suite.jsonl"
echo "$line"
# all.jsonl: every step's JSON lines with the step's name added
"$PY" - "$OUT_DIR" <<'EOF'
import json, os, sys
out = sys.argv[1]
lines = []
with open(os.path.join(out, "suite.jsonl")) as f:
    steps = [json.loads(x)["step"] for x in f if x.startswith("{")]
for step in steps:
    path = os.path.join(out, f"{step}.jsonl")
    if not os.path.exists(path):
        continue
    with open(path) as f:
        for raw in f:
            if raw.startswith("{"):
                try:
                    lines.append(json.dumps({"step": step, **json.loads(raw)}))
                except json.JSONDecodeError:
                    pass
tmp = os.path.join(out, "all.jsonl.tmp")
with open(tmp, "w") as f:
    f.write("".join(x + "\n" for x in lines))
os.replace(tmp, os.path.join(out, "all.jsonl"))
EOF
[ ${#FAILED[@]} -eq 0 ]
