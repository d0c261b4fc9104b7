# shellcheck shell=bash disable=SC2154  # out is the sourcing script's
# MPS for the GPU runs of perf/gpu/run_all.sh and perf/gpu/fabric_nccl_tests.sh (sourced; needs
# `out`, whose device.txt says whether MPS was on). Without MPS every process sharing the GPU
# waits for its time slice: a 4 KiB allreduce of 4 processes takes 27 ms instead of 0.22 ms, so
# nothing can be timed. MPS=0 leaves it off.
#   start_mps WHAT   WHAT names what runs under it ("the benchmark stages"), for device.txt
#   stop_mps         stops a daemon start_mps started (one already running is left as it is)
# Every control call is under `timeout 5`: a wedged control client must not hang a stage, or
# the caller's exit trap.
mps_started=0  # start_mps started the daemon (stop_mps stops it)
mps_checked=0  # start_mps has looked since the last stop_mps
mps_control() { timeout 5 nvidia-cuda-mps-control "$@"; }
mps_note() { echo "MPS: $*" >> "$out/device.txt"; }
start_mps() {
  [ $mps_started = 0 ] && [ $mps_checked = 0 ] || return 0
  mps_checked=1
  if [ "${MPS:-1}" != 1 ]; then mps_note "off (MPS=${MPS:-}): $1 time-slice the GPU"; return 0; fi
  if ! command -v nvidia-cuda-mps-control > /dev/null; then
    mps_note "off, nvidia-cuda-mps-control not found: $1 time-slice the GPU"
    return 0
  fi
  local ours=0
  [ -z "${CUDA_MPS_PIPE_DIRECTORY:-}" ] && ours=1
  export CUDA_MPS_PIPE_DIRECTORY=${CUDA_MPS_PIPE_DIRECTORY:-/tmp/topocoll-mps-pipe}
  export CUDA_MPS_LOG_DIRECTORY=${CUDA_MPS_LOG_DIRECTORY:-/tmp/topocoll-mps-log}
  mkdir -p "$CUDA_MPS_PIPE_DIRECTORY" "$CUDA_MPS_LOG_DIRECTORY"
  # A daemon in our own pipe directory was left by an earlier call the device tool killed (its
  # exit trap never ran): it may serve a client killed mid-kernel, so it is restarted, not
  # reused. One in a directory the caller named is the caller's, and left as it is.
  if [ $ours = 1 ] && echo get_server_list | mps_control > /dev/null 2>&1; then
    echo quit | mps_control
    for _ in $(seq 50); do
      echo get_server_list | mps_control > /dev/null 2>&1 || break
      sleep 0.2
    done
    mps_note "a daemon left by an earlier call was stopped ($(date -u +%T))"
  fi
  if echo get_server_list | mps_control > /dev/null 2>&1; then
    mps_note "on, already running ($(date -u +%T)); left running at exit"
  elif mps_control -d; then
    mps_started=1
    mps_note "on, started for $1 ($(date -u +%T))"
  else
    mps_note "off, nvidia-cuda-mps-control -d failed: $1 time-slice the GPU ($(date -u +%T))"
  fi
}
stop_mps() {
  mps_checked=0
  [ $mps_started = 1 ] || return 0
  echo quit | mps_control
  cp -r "$CUDA_MPS_LOG_DIRECTORY" "$out/mps-log" 2>/dev/null
  # Gone before the next stage starts its own (a daemon still shutting down would answer).
  for _ in $(seq 50); do
    echo get_server_list | mps_control > /dev/null 2>&1 || break
    sleep 0.2
  done
  mps_started=0
  mps_note "stopped ($(date -u +%T))"
}
