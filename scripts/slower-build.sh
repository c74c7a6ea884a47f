#!/usr/bin/env bash
# Write a "test build" of kimi-bench whose deferred arm does more real work:
#   bash scripts/slower-build.sh OUT FRACTION CMD...
# OUT becomes an executable that runs CMD (a kimi-bench command, e.g. `kimi-bench` or
# `python3 -m kimi_bench.cli.main`) with this checkout's tests/ importable (OUT.d/tests, a
# link: the kimi_bench package stays the one CMD runs); for `micro` it adds
# --fault-hooks tests.faults:SlowerArm:fraction=FRACTION, so every scheduler rank busy-loops
# at the end of the deferred arm's owner_materialize stage for FRACTION of the arm's time
# so far (inside the measured region: the report is never edited). FRACTION 0 writes a
# plain wrapper (no hook), for the base side of an A/B.
set -eu
out=${1:?usage: slower-build.sh OUT FRACTION CMD...}
fraction=${2:?usage: slower-build.sh OUT FRACTION CMD...}
shift 2
(( $# )) || { echo "usage: slower-build.sh OUT FRACTION CMD..." >&2; exit 2; }
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
mkdir -p "$out.d"
ln -sfn "$root/tests" "$out.d/tests"
path=$(cd "$out.d" && pwd)
{
  echo '#!/usr/bin/env bash'
  echo "# kimi-bench test build: deferred arm +$fraction of its time (tests.faults:SlowerArm)"
  printf 'export PYTHONPATH=${PYTHONPATH:+$PYTHONPATH:}%q\n' "$path"
  printf 'cmd=(%s)\n' "$(printf '%q ' "$@")"
  if [[ $fraction == 0 ]]; then
    echo 'exec "${cmd[@]}" "$@"'
  else
    echo 'if [[ ${1-} == micro ]]; then'
    printf '  exec "${cmd[@]}" "$@" --fault-hooks tests.faults:SlowerArm:fraction=%q\n' "$fraction"
    echo 'fi'
    echo 'exec "${cmd[@]}" "$@"'
  fi
} > "$out"
chmod +x "$out"
