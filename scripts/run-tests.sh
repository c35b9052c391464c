#!/usr/bin/env bash
# `make test`'s runner: the real-Flink scenarios, in two halves, beside the rest of the suite; then StreamBed alone.
#
# The scenarios under tests/flink run a Flink cluster, Prometheus and Perdix in real time (about fifteen minutes
# one after another on two cores) and mostly wait: a quarter of a core between them, the JVMs included. So they run
# as two pytest processes, each with a session cluster of its own (every port is drawn free, every directory is
# the process's own), beside the rest of the suite, CPU-bound, at a low priority (nice 15) so that the real-time
# scenarios keep the CPU they had alone; the rest runs on two pytest-xdist workers, a test file to each, to take
# both cores whenever the scenarios wait. FLINK_FIRST is the first half: the long end-to-end scenario on Flink 2.3
# and then on 1.20 (about 345 s each), the generator's end-to-end run and the multi-slot scale-in (about 2 minutes
# together); every other file under tests/flink, a new one included, is the second half (about 12 minutes beside
# the rest, the 1.20 runs of the modules marked both_flink_versions included, see tests/flink/conftest.py), at
# nice 5: each end-to-end agent measures the job's capacity at one slot in its first minute, the first while both
# clusters and the main suite start, the second while the second half runs, so when they all want the CPU at once
# the first half comes first.
# The agent image is built from the start beside them at the main suite's priority (scripts/build-image.sh: about
# a minute with the base image and the wheels cached under .tools, five on a fresh machine); the image test in the
# second half (tests/flink/test_image.py) runs the same script, which waits for that build (a lock) and finds
# every layer built, then runs the image against its cluster.
# FLINK_ALONE runs after all three, on a machine with nothing else to do: StreamBed measures the job's maximum
# sustainable throughput, which is the CPU a slot gets (beside both halves a slot carried 13 % less and the prior
# came out of its 10 % tolerance). The main suite streams to the terminal; the halves' output follows
# when all three are done, then the last run streams. The exit status is non-zero if any failed.
#
# An interrupt (Ctrl-C, a cancelled CI job) reaches every run: the Flink runs get SIGINT too, so their fixtures
# stop the clusters, Prometheus and Perdix before they exit.
#
# Usage: scripts/run-tests.sh PYTHON [pytest options for every run, e.g. -x or -p no:cacheprovider]
# (to run some tests only, call pytest directly: a selection would leave one of the runs empty).
set -uo pipefail
python=${1:?usage: scripts/run-tests.sh PYTHON [pytest options...]}
shift
FLINK_FIRST=(tests/flink/test_e2e_daedalus.py tests/flink/test_e2e_generator.py tests/flink/test_multi_slot.py)
FLINK_ALONE=(tests/flink/test_streambed_flink.py)
ignore=()
for file in "${FLINK_FIRST[@]}" "${FLINK_ALONE[@]}"; do
    [ -f "$file" ] || { echo "scripts/run-tests.sh: $file (FLINK_FIRST or FLINK_ALONE) does not exist" >&2; exit 2; }
    ignore+=("--ignore=$file")
done

first_log=$(mktemp -t perdix-flink-tests-1.XXXXXX)
second_log=$(mktemp -t perdix-flink-tests-2.XXXXXX)
started=$(date +%s)

# Job control gives each background run its own process group and keeps SIGINT's default action for it
# (a script's background jobs otherwise ignore SIGINT).
set -m
"$python" -m pytest -q --durations=10 "$@" "${FLINK_FIRST[@]}" >"$first_log" 2>&1 &
first=$!
nice -n 5 "$python" -m pytest -q --durations=25 "$@" tests/flink "${ignore[@]}" >"$second_log" 2>&1 &
second=$!
# (a failed build is reported by the image test, which runs the script again)
PYTHON=$python nice -n 15 bash scripts/build-image.sh >/dev/null 2>&1 &
image_build=$!
set +m
interrupted() {
    kill -INT -- "-$first" "-$second" "-$image_build" 2>/dev/null
    wait "$first" "$second" "$image_build" 2>/dev/null
    cat "$first_log" "$second_log"
    rm -f "$first_log" "$second_log"
    exit 130
}
trap interrupted INT TERM
trap 'rm -f "$first_log" "$second_log"' EXIT

nice -n 15 "$python" -m pytest -q -n 2 --dist loadfile --durations=15 "$@" --ignore=tests/flink
rest=$?
wait "$first"
first_status=$?
wait "$second"
second_status=$?
wait "$image_build"
echo "--- the real-Flink scenarios, first half (${FLINK_FIRST[*]}), run beside the above ---"
cat "$first_log"
echo "--- the real-Flink scenarios, second half (the rest of tests/flink), run beside the above ---"
cat "$second_log"
trap - INT TERM  # the last run is in the foreground: an interrupt reaches it directly
echo "--- StreamBed on real Flink (${FLINK_ALONE[*]}), alone ---"
"$python" -m pytest -q --durations=5 "$@" "${FLINK_ALONE[@]}"
alone=$?
echo "make test: $(( $(date +%s) - started )) s wall (tests/flink halves exit $first_status and $second_status," \
     "StreamBed exit $alone, the rest exit $rest)"
[ "$rest" -eq 0 ] && [ "$first_status" -eq 0 ] && [ "$second_status" -eq 0 ] && [ "$alone" -eq 0 ]
