#!/usr/bin/env bash
# `make test`'s runner: the real-Flink scenarios and the rest of the suite side by side.
#
# The scenarios under tests/flink run a Flink cluster, Prometheus and Perdix in real time (about eleven of the
# suite's seventeen minutes on two cores) and mostly wait; the rest is CPU-bound. They run as two pytest
# processes at once, the CPU-bound one at a lower priority (nice 10) so that the real-time scenarios keep the
# CPU they had alone. The main suite streams to the terminal; the Flink suite's output follows when both are
# done. The exit status is non-zero if either failed.
#
# An interrupt (Ctrl-C, a cancelled CI job) reaches both: the Flink suite gets SIGINT too, so its fixtures stop
# the cluster, Prometheus and Perdix before it exits.
#
# Usage: scripts/run-tests.sh PYTHON [pytest options for both runs, e.g. -x or -p no:cacheprovider]
# (to run some tests only, call pytest directly: a selection would leave one of the two runs empty).
set -uo pipefail
python=${1:?usage: scripts/run-tests.sh PYTHON [pytest options...]}
shift
log=$(mktemp -t perdix-flink-tests.XXXXXX)
started=$(date +%s)

# Job control gives the background run its own process group and keeps SIGINT's default action for it
# (a script's background jobs otherwise ignore SIGINT).
set -m
"$python" -m pytest -q --durations=10 "$@" tests/flink >"$log" 2>&1 &
flink=$!
set +m
interrupted() {
    kill -INT -- "-$flink" 2>/dev/null
    wait "$flink" 2>/dev/null
    cat "$log"
    rm -f "$log"
    exit 130
}
trap interrupted INT TERM
trap 'rm -f "$log"' EXIT

nice -n 10 "$python" -m pytest -q --durations=15 "$@" --ignore=tests/flink
rest=$?
echo "--- the real-Flink scenarios (tests/flink), run beside the above ---"
wait "$flink"
status=$?
cat "$log"
echo "make test: $(( $(date +%s) - started )) s wall (tests/flink exit $status, the rest exit $rest)"
[ "$rest" -eq 0 ] && [ "$status" -eq 0 ]
