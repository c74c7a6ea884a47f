# Shared by scripts/sglang-env.sh and scripts/transformers-serve-env.sh (sourced, not run):
# where the venv goes, and one timed, time-bounded step at a time.
#   NAME, STEP_TIMEOUT, REPO, VENV, PYTHON, TORCH_SPEC   (set by the caller)
#   venv_path     make VENV absolute; refuse a path inside the checkout that git does not ignore
#   step LABEL CMD...   run CMD within STEP_TIMEOUT seconds, saying what and how long
#   venv_with_torch MINOR   Python >= 3.MINOR, then the venv and torch as the first two
#                           steps; sets PIP (the venv's pip) for the caller's steps
#   ready         the closing line, with the time since venv_with_torch

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

venv_with_torch() {
    local minor=$1
    "$PYTHON" -c "import sys; sys.exit(sys.version_info < (3, $minor))" \
        || die "$PYTHON is older than 3.$minor (set PYTHON=...)"
    venv_path
    START=$SECONDS
    PIP=("$VENV/bin/python" -m pip --disable-pip-version-check -q)
    local torch_args=()
    [[ -n "${TORCH_INDEX_URL:-}" ]] && torch_args=(--index-url "$TORCH_INDEX_URL")
    step "venv ($PYTHON)" "$PYTHON" -m venv --clear "$VENV"
    step "torch ($TORCH_SPEC)" "${PIP[@]}" install "${torch_args[@]}" "$TORCH_SPEC"
}

ready() { echo "$NAME: $VENV ready in $((SECONDS - START)) s" >&2; }
