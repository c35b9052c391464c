#!/usr/bin/env bash
# Installs real Apache Flink distributions for the end-to-end tests: the PyPI package apache-flink carries a full
# Flink distribution inside pyflink/ (bin/, lib/, plugins/metrics-prometheus). It pins its own numpy and pandas,
# so each version lives in a virtual environment of its own under .tools/, never in the project's .venv.
#
# Usage: scripts/install-flink.sh [VERSION...]   VERSION: a release below or its series (2.3, 1.20); none: all
#        scripts/install-flink.sh --list         one line per release: VERSION VENV (what lab/flink/cluster.py reads)
#
# The releases the tests run on, newest of their series on PyPI; lab/flink/cluster.py's FLINK_RELEASES names the
# same (a test compares the two).
# Idempotent: a no-op when a version is already installed. Prints nothing on success.
set -euo pipefail
cd "$(dirname "$0")/.."

RELEASES=(
    "2.3.0 .tools/flink-venv"
    "1.20.5 .tools/flink-venv-1.20"
)
PYTHON="${PYTHON:-python3}"

if [ "${1:-}" = "--list" ]; then
    printf '%s\n' "${RELEASES[@]}"
    exit 0
fi

# The release a VERSION argument names ("2.3.0" or its series "2.3"): "VERSION VENV", or nothing.
release_of() {
    local line
    for line in "${RELEASES[@]}"; do
        local version=${line%% *}
        if [ "$1" = "$version" ] || [ "$1" = "${version%.*}" ]; then
            echo "$line"
            return
        fi
    done
}

install_one() {
    local version=$1 venv=$PWD/$2
    local stamp="$venv/.installed-$version"
    if [ -f "$stamp" ] && [ -x "$venv/bin/python" ]; then
        return 0
    fi
    # make test runs several pytest processes that may need Flink first: one installs, the others wait for it.
    mkdir -p "$(dirname "$venv")"
    exec 9>"$venv.lock"
    flock 9
    if [ -f "$stamp" ] && [ -x "$venv/bin/python" ]; then
        exec 9>&-
        return 0
    fi
    command -v java >/dev/null || { echo "install-flink: java (17+) is required (see scripts/install-system-deps.sh)" >&2; exit 1; }

    echo "install-flink: installing apache-flink==$version into $venv (a few minutes, once)"
    "$PYTHON" -m venv "$venv"
    "$venv/bin/pip" install --quiet --upgrade pip
    "$venv/bin/pip" install --quiet "apache-flink==$version"

    local home
    home="$("$venv/bin/python" -c 'import os, pyflink; print(os.path.dirname(pyflink.__file__))')"
    local part
    for part in bin/jobmanager.sh bin/taskmanager.sh bin/flink lib; do
        [ -e "$home/$part" ] || { echo "install-flink: $home/$part missing from apache-flink==$version" >&2; exit 1; }
    done
    ls "$home"/plugins/metrics-prometheus/*.jar >/dev/null 2>&1 || {
        echo "install-flink: the Prometheus metrics reporter is missing from $home/plugins (apache-flink==$version)" >&2
        exit 1
    }
    chmod +x "$home"/bin/*.sh "$home/bin/flink" 2>/dev/null || true
    rm -f "$venv"/.installed-*
    touch "$stamp"
    exec 9>&-
}

wanted=("$@")
if [ ${#wanted[@]} -eq 0 ]; then
    for line in "${RELEASES[@]}"; do wanted+=("${line%% *}"); done
fi
for arg in "${wanted[@]}"; do
    release=$(release_of "$arg")
    if [ -z "$release" ]; then
        echo "install-flink: unknown Flink version '$arg' (known: $(printf '%s ' "${RELEASES[@]%% *}"| sed 's/ $//'))" >&2
        exit 2
    fi
    install_one ${release}
done
