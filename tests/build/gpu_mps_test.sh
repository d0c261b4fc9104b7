#!/usr/bin/env bash
# perf/gpu/mps.sh, the MPS control of the GPU runs, against a stand-in nvidia-cuda-mps-control
# (a daemon is a state file): it starts a daemon once and stops only the one it started, leaves
# one already running, says in device.txt whether MPS was on and why not, and a wedged control
# client does not hang it.
#   gpu_mps_test.sh SOURCE_DIR WORK_DIR
set -uo pipefail
src=$1 work=$2
fail() { echo "FAIL: $*" >&2; exit 1; }
rm -rf "$work"
mkdir -p "$work/bin"
cat > "$work/bin/nvidia-cuda-mps-control" <<'STUB'
#!/usr/bin/env bash
# -d: start the daemon (MPS_STUB_FAIL_START=1: fails); stdin get_server_list: 0 while it runs;
# stdin quit: stop it. MPS_STUB_WEDGED=1: never answers. Every call is logged.
state=$MPS_STUB_DIR/running
[ "${MPS_STUB_WEDGED:-0}" = 1 ] && exec sleep 1000
if [ "${1:-}" = -d ]; then
  echo "-d" >> "$MPS_STUB_DIR/calls"
  [ "${MPS_STUB_FAIL_START:-0}" = 1 ] && exit 1
  touch "$state"; exit 0
fi
read -r command
echo "$command" >> "$MPS_STUB_DIR/calls"
case $command in
  get_server_list) [ -f "$state" ] ;;
  quit) rm -f "$state" ;;
esac
STUB
chmod +x "$work/bin/nvidia-cuda-mps-control"

# One case: a fresh shell sources mps.sh with `out` and the stand-in on PATH, runs COMMANDS.
case_dir=""
run_case() {
  local name=$1 commands=$2; shift 2
  case_dir=$work/$name
  mkdir -p "$case_dir/out" "$case_dir/stub"
  env "$@" MPS_STUB_DIR="$case_dir/stub" PATH="$work/bin:$PATH" \
      CUDA_MPS_PIPE_DIRECTORY="$case_dir/pipe" CUDA_MPS_LOG_DIRECTORY="$case_dir/log" \
      bash -c "out=$case_dir/out; . '$src/perf/gpu/mps.sh'; $commands" > "$case_dir/log.txt" 2>&1 ||
    fail "$name: the commands failed: $(cat "$case_dir/log.txt")"
}
calls() { cat "$case_dir/stub/calls" 2>/dev/null | tr '\n' ' '; }
said() { grep -q -- "$1" "$case_dir/out/device.txt" || fail "$2: device.txt lacks '$1': $(cat "$case_dir/out/device.txt")"; }

# Not running: started once (a second start_mps asks nothing), stopped once, gone after.
run_case fresh 'start_mps "the stages"; start_mps "the stages"; stop_mps; stop_mps'
[ "$(calls)" = "get_server_list -d quit get_server_list " ] || fail "fresh: calls were: $(calls)"
[ ! -f "$case_dir/stub/running" ] || fail "fresh: the daemon it started was left running"
said "MPS: on, started for the stages" fresh
said "MPS: stopped" fresh

# Already running (an earlier call's): asked once, used, never stopped.
mkdir -p "$work/running/stub" && touch "$work/running/stub/running"
run_case running 'start_mps "the stages"; start_mps "the stages"; stop_mps'
[ "$(calls)" = "get_server_list " ] || fail "running: calls were: $(calls)"
[ -f "$case_dir/stub/running" ] || fail "running: a daemon it did not start was stopped"
said "already running" running

# Running in our own pipe directory (none named): left by an earlier call the device tool
# killed, it is stopped and a fresh one started (and stopped at the end).
mkdir -p "$work/leftover/stub" && touch "$work/leftover/stub/running"
run_case leftover 'unset CUDA_MPS_PIPE_DIRECTORY; start_mps "the stages"; stop_mps'
[ "$(calls)" = "get_server_list quit get_server_list get_server_list -d quit get_server_list " ] ||
  fail "leftover: calls were: $(calls)"
said "a daemon left by an earlier call was stopped" leftover
said "on, started for the stages" leftover

# Started again after a stop (run_all.sh stops it around the fabric stage).
run_case restart 'start_mps a; stop_mps; start_mps b; stop_mps'
[ "$(calls)" = "get_server_list -d quit get_server_list get_server_list -d quit get_server_list " ] ||
  fail "restart: calls were: $(calls)"
said "started for b" restart

# Off, each with its reason, and nothing started.
run_case off 'start_mps "the stages"; stop_mps' MPS=0
[ -z "$(calls)" ] || fail "off: MPS=0 still called: $(calls)"
said "MPS: off (MPS=0): the stages time-slice the GPU" off
run_case failed 'start_mps "the stages"; stop_mps' MPS_STUB_FAIL_START=1
[ "$(calls)" = "get_server_list -d " ] || fail "failed: calls were: $(calls)"
said "MPS: off, nvidia-cuda-mps-control -d failed" failed
run_case absent 'PATH=/usr/bin:/bin; start_mps "the stages"; stop_mps'
said "MPS: off, nvidia-cuda-mps-control not found" absent

# A wedged control client: each call given up after 5 s, so the whole start ends.
start=$SECONDS
run_case wedged 'start_mps "the stages"; stop_mps' MPS_STUB_WEDGED=1
[ $((SECONDS - start)) -lt 20 ] || fail "wedged: start_mps took $((SECONDS - start)) s"
said "MPS: off, nvidia-cuda-mps-control -d failed" wedged
pkill -f "$work/bin/nvidia-cuda-mps-control" 2> /dev/null
echo "PASS"
