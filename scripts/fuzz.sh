#!/usr/bin/env bash
# fuzz.sh GO FUZZTIME PKG:Target... runs each fuzz target for FUZZTIME.
#
# A target fails when the fuzzer finds something: it then writes a failing
# input ("Failing input written to testdata/fuzz/…") or the target reports
# an error. Go 1.26's fuzz coordinator may also end a run that found nothing
# with a bare "context deadline exceeded" at the -fuzztime boundary when the
# machine is loaded (go.dev/issue/75804, fixed in Go 1.27). Such a run is
# tried once more, and said so; a second one is reported and not counted as
# a failure, since no input failed. Any other failure fails at once.
set -uo pipefail
go=$1 fuzztime=$2
shift 2
status=0
for t in "$@"; do
	pkg=${t%%:*} fn=${t##*:}
	for try in 1 2; do
		echo "fuzz $pkg $fn ($fuzztime)"
		out=$("$go" test -run='^$' -fuzz="^$fn\$" -fuzztime="$fuzztime" "$pkg" 2>&1)
		rc=$?
		printf '%s\n' "$out"
		if grep -q 'no fuzz tests to fuzz' <<<"$out"; then
			echo "fuzz $pkg $fn: there is no such fuzz target (the Makefile's FUZZ_TARGETS names it)" >&2
			status=1
			break
		fi
		if ((rc == 0)); then
			break
		fi
		if grep -q 'context deadline exceeded' <<<"$out" &&
			! grep -qE 'Failing input written|panic:|_test\.go:[0-9]+:' <<<"$out"; then
			if ((try == 1)); then
				echo "fuzz $pkg $fn: the run ended on the coordinator's deadline with no failing input (go.dev/issue/75804); trying once more"
				continue
			fi
			echo "fuzz $pkg $fn: again ended on the coordinator's deadline with no failing input (go.dev/issue/75804); not a finding"
			break
		fi
		echo "fuzz $pkg $fn: FAILED" >&2
		status=1
		break
	done
done
exit $status
