#!/usr/bin/env bash
# The docs part of CI (.ci/run), in two steps so the slow installs overlap the test suite:
#
#   docs/ci.sh prepare   Chromium (Debian's package, if missing) and the docs venv .venv-docs;
#                        started in the background before the tests, at the lowest CPU and I/O
#                        priority, so it takes what the suite leaves idle (downloads, unpacking).
#   docs/ci.sh check     after the tests: build the site with warnings as errors, then the site
#                        tests (docs/tests/: every notebook has its page, a planted broken link
#                        and a planted missing image fail a build, three pages in Chromium).
#
# The docs venv gets ropelab's dependencies and the docs extra, not ropelab itself: conf.py imports
# the checkout's ropelab from its path, and a second `pip install -e .` running beside the test
# venv's would write the same ropelab.egg-info/ at the same time.  numba-cuda comes without its
# cu13 extra (the CUDA toolkit wheels, 456 MB): the build imports ropelab on the simulator and
# compiles nothing.  Each step prints its seconds.
set -euo pipefail
cd "$(dirname "$0")/.."
VENV=.venv-docs
OUT=docs/_build

seconds() { echo "docs: $1 took $(($(date +%s) - $2)) s"; }

prepare() {
    local t0 apt=""
    t0=$(date +%s)
    if ! command -v chromium >/dev/null; then
        # CI runs as root; apt's lists may be stale on a fresh machine, so update first.  Beside
        # the venv install: both mostly wait on downloads.
        (apt-get update -q >/dev/null \
            && DEBIAN_FRONTEND=noninteractive apt-get install -y -q chromium >/dev/null \
            && seconds "apt-get install chromium" "$t0") &
        apt=$!
    fi
    python3 -m venv "$VENV"
    python3 - > "$VENV/docs-requirements.txt" <<'EOF'
import re, tomllib
project = tomllib.load(open("pyproject.toml", "rb"))["project"]
for requirement in project["dependencies"] + project["optional-dependencies"]["docs"]:
    print(re.sub(r"^numba-cuda\[[^]]*\]", "numba-cuda", requirement))
EOF
    # uv, as the test venv (.ci/run): pip took 252 s here, niced beside the suite, and its
    # resolving and unpacking took CPU the suite wanted (its tests ran ~30 s longer beside it).
    "$VENV/bin/pip" install -q uv
    "$VENV/bin/uv" pip install -q --python "$VENV/bin/python" -r "$VENV/docs-requirements.txt"
    seconds "the docs venv install" "$t0"
    if [ -n "$apt" ]; then wait "$apt"; fi  # its status is the function's (set -e)
}

check() {
    local t0
    t0=$(date +%s)
    rm -rf "$OUT/html"
    "$VENV/bin/python" -m sphinx -W --keep-going -q -b html docs "$OUT/html"
    seconds "the build (sphinx -W)" "$t0"
    t0=$(date +%s)
    "$VENV/bin/python" -m pytest -o addopts="-ra" -p no:cacheprovider --noconftest -q docs/tests
    seconds "the site tests" "$t0"
}

case "${1:-}" in
    prepare) prepare ;;
    check) check ;;
    *) echo "usage: docs/ci.sh prepare|check" >&2; exit 2 ;;
esac
