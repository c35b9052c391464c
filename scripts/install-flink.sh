#!/usr/bin/env bash
# Installs a real Apache Flink for the end-to-end tests: the PyPI package apache-flink carries a full
# Flink distribution inside pyflink/ (bin/, lib/, plugins/metrics-prometheus). It pins its own numpy
# and pandas, so it lives in its own virtual environment, .tools/flink-venv, never in the project's .venv.
# Idempotent: a no-op when the pinned version is already installed. Prints nothing on success.
set -euo pipefail
cd "$(dirname "$0")/.."

FLINK_VERSION="${FLINK_VERSION:-2.3.0}"
VENV="$PWD/.tools/flink-venv"
STAMP="$VENV/.installed-$FLINK_VERSION"
PYTHON="${PYTHON:-python3}"

if [ -f "$STAMP" ] && [ -x "$VENV/bin/python" ]; then
    exit 0
fi
# make test runs two pytest processes that may both need Flink first: one installs, the other waits for it.
mkdir -p "$(dirname "$VENV")"
exec 9>"$VENV.lock"
flock 9
if [ -f "$STAMP" ] && [ -x "$VENV/bin/python" ]; then
    exit 0
fi
command -v java >/dev/null || { echo "install-flink: java (17+) is required (see scripts/install-system-deps.sh)" >&2; exit 1; }

echo "install-flink: installing apache-flink==$FLINK_VERSION into $VENV (a few minutes, once)"
"$PYTHON" -m venv "$VENV"
"$VENV/bin/pip" install --quiet --upgrade pip
"$VENV/bin/pip" install --quiet "apache-flink==$FLINK_VERSION"

home="$("$VENV/bin/python" -c 'import os, pyflink; print(os.path.dirname(pyflink.__file__))')"
for part in bin/jobmanager.sh bin/taskmanager.sh bin/flink lib; do
    [ -e "$home/$part" ] || { echo "install-flink: $home/$part missing from apache-flink==$FLINK_VERSION" >&2; exit 1; }
done
ls "$home"/plugins/metrics-prometheus/*.jar >/dev/null 2>&1 || {
    echo "install-flink: the Prometheus metrics reporter is missing from $home/plugins" >&2
    exit 1
}
chmod +x "$home"/bin/*.sh "$home/bin/flink" 2>/dev/null || true
rm -f "$VENV"/.installed-*
touch "$STAMP"
