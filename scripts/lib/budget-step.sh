# shellcheck shell=bash
# One helper for the device scripts (scripts/h200-*.sh), sourced after they set:
#   out (the output folder), budget (seconds this call may use), status (0; set to 1 when a
#   step fails) and optionally step_scale (multiplies EXPECTED_S: 0 for a dry run on a CPU).
# step EXPECTED_S LOG CMD...: run CMD with its output in LOG unless fewer than EXPECTED_S
# seconds of the budget are left (then it is named in $out/skipped.txt); prints its time,
# exit code and last line.
step() {
  local expect=$(( $1 * ${step_scale:-1} )) log=$2
  shift 2
  if (( SECONDS + expect > budget )); then
    echo "SKIPPED (time budget): $*" | tee -a "$out/skipped.txt"
    return 0
  fi
  local t0=$SECONDS rc=0
  "$@" > "$log" 2>&1 || rc=$?
  (( rc == 0 )) || status=1
  echo "[$((SECONDS - t0)) s, exit $rc] $(basename "$log"): $(tail -1 "$log")"
}
