# Prerequisites of an integration test. Sourced (lib.sh sources it; a test
# that does not use lib.sh sources this alone).
#
# A missing prerequisite is a skip only where it may be missing: under CI
# (CI=true) scripts/install-deps.sh has installed everything, so a missing
# tool is a broken install step and the test fails. Elsewhere the test
# exits 77, which ctest counts as skipped (SKIP_RETURN_CODE, set for every
# integration test) and scripts/test.sh reports apart, never as passed.

# skip_or_fail WHY: stop the test for a missing prerequisite.
skip_or_fail() {
	if [ "${CI:-}" = true ]; then
		echo "FAIL: missing prerequisite under CI: $1" >&2
		exit 1
	fi
	echo "SKIP: $1"
	exit 77
}

# need COMMAND [WHERE-FROM]: COMMAND on PATH, or skip_or_fail.
need() {
	command -v "$1" >/dev/null ||
		skip_or_fail "$1 is not installed${2:+ ($2)}; scripts/install-deps.sh installs it"
}
