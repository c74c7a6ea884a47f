# Shared by scripts/sglang-env.sh and scripts/transformers-serve-env.sh (sourced, not run):
# where the venv goes, and one timed, time-bounded step at a time.
#   NAME=...; STEP_TIMEOUT=...; REPO=...; VENV=...   (set by the caller)
#   venv_path     make VENV absolute; refuse a path inside the checkout that git does not ignore
#   step LABEL CMD...   run CMD within STEP_TIMEOUT seconds, saying what and how long

die() { echo "$NAME: $*" >&2; exit 1; }

venv_path() {
    mkdir -p "$(dirname "$VENV")"
    VENV=$(cd "$(dirname "$VENV")" && pwd)/$(basename "$VENV")
    case "$VENV/" in
        "$REPO"/*)
            git -C "$REPO" check-ignore -q "$VENV" \
                || die "$VENV is inside the checkout and not ignored by git; put it elsewhere"
            ;;
    esac
}

step() {
    local label=$1
    shift
    local t0=$SECONDS
    echo "$NAME: $label" >&2
    if ! timeout "$STEP_TIMEOUT" "$@"; then
        die "step '$label' failed or ran past ${STEP_TIMEOUT}s"
    fi
    echo "$NAME: $label done in $((SECONDS - t0)) s" >&2
}
