#!/usr/bin/env bash
# The four Ctrl-C tests, N rounds in a row (default 20), as a background job would run them:
# pytest started with SIGINT ignored, one core kept busy by a shell loop, 2 workers. Prints
# one line per round with the load average; exits 1 unless every round passed.
#
#   bash scripts/sigint-rounds.sh [N]     (run with the venv whose pytest to use)
set -uo pipefail
cd "$(dirname "$0")/.."
rounds=${1:-20}
tests=(
  "tests/integration/test_http_client.py::test_ctrl_c_keeps_the_records_so_far"
  "tests/integration/test_interrupt.py::test_ctrl_c_writes_partial_report_and_cleans_up"
  "tests/integration/test_serve_ab_http.py::test_ctrl_c_stops_the_servers_it_started"
  "tests/integration/test_zero_copy.py::test_interrupt_leaves_no_segment_and_no_process[ctrl-c]"
)
( while :; do :; done ) &
busy=$!
trap 'kill "$busy"' EXIT
log=$(mktemp -d)
passed=0
for i in $(seq 1 "$rounds"); do
  t=$(date +%s)
  python -c 'import os, signal, sys; signal.signal(signal.SIGINT, signal.SIG_IGN); os.execvp(sys.argv[1], sys.argv[1:])' \
    env KB_TEST_WORKERS=2 python -m pytest -q -p no:cacheprovider "${tests[@]}" >"$log/round-$i.txt" 2>&1 &
  wait $!
  rc=$?
  [[ $rc -eq 0 ]] && passed=$((passed + 1))
  echo "round $i: exit $rc in $(( $(date +%s) - t )) s; $(tail -n 1 "$log/round-$i.txt"); load $(cut -d' ' -f1-3 /proc/loadavg)"
done
echo "$passed of $rounds rounds passed (logs: $log)"
[[ $passed -eq $rounds ]]
