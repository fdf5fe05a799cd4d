#!/usr/bin/env bash
# The code's layout by .clang-format, on the files .clang-format-files
# lists (not yet the whole tree: see HACKING.md, "Layout").
#
#   scripts/format.sh            check: print what would change, exit 1 if anything would
#   scripts/format.sh --fix      rewrite the listed files in place
#   scripts/format.sh [--fix] FILE...   the same on FILE... instead of the list
#
# clang-format 14 exactly: each release lays out some constructs
# differently, so another one would report changes that are not there.
# Without it: under CI (CI=true) a failure, as for any missing
# prerequisite (scripts/install-deps.sh installs it); elsewhere exit 77,
# which ctest (lint/format) counts as skipped.
set -euo pipefail
cd "$(dirname "$0")/.."

fix=0
if [ "${1:-}" = --fix ]; then
	fix=1
	shift
elif [ "${1:-}" = --check ]; then
	shift
fi
case "${1:-}" in
-h | --help)
	sed -n '2,13p' "$0" | sed 's/^# \{0,1\}//'
	exit 0
	;;
-*)
	echo "format.sh: unknown option $1 (--check, --fix)" >&2
	exit 2
	;;
esac

missing() {
	if [ "${CI:-}" = true ]; then
		echo "format.sh: FAIL: $1 under CI; scripts/install-deps.sh installs it" >&2
		exit 1
	fi
	echo "format.sh: SKIP: $1; scripts/install-deps.sh installs it"
	exit 77
}
cf=""
for c in clang-format-14 clang-format; do
	if command -v "$c" >/dev/null && "$c" --version | grep -q 'version 14\.'; then
		cf=$c
		break
	fi
done
[ -n "$cf" ] || missing "clang-format 14 is not installed"

# The files: arguments, or every .c and .h under each path of the list
# (blank lines and # comments skipped; a listed path that is gone is an
# error, so the list cannot quietly cover less than it says).
files=()
if [ $# -gt 0 ]; then
	files=("$@")
else
	while IFS= read -r line || [ -n "$line" ]; do
		line=${line%%#*}
		line=$(echo "$line" | xargs)
		[ -n "$line" ] || continue
		if [ -d "$line" ]; then
			while IFS= read -r f; do files+=("$f"); done < <(find "$line" -type f \( -name '*.c' -o -name '*.h' \) | sort)
		elif [ -f "$line" ]; then
			files+=("$line")
		else
			echo "format.sh: .clang-format-files lists $line, which does not exist" >&2
			exit 1
		fi
	done <.clang-format-files
fi
[ ${#files[@]} -gt 0 ] || { echo "format.sh: no files" >&2; exit 1; }

if [ $fix = 1 ]; then
	"$cf" -i --style=file "${files[@]}"
	exit 0
fi
# One clang-format for all the files (fast); the diffs only when it objects.
if "$cf" --dry-run --Werror --style=file "${files[@]}" 2>/dev/null; then
	echo "format.sh: ${#files[@]} file(s) as .clang-format lays them out"
	exit 0
fi
bad=0
for f in "${files[@]}"; do
	if ! "$cf" --style=file "$f" | diff -u --label "$f" --label "$f (clang-format)" "$f" - ; then
		bad=$((bad + 1))
	fi
done
if [ $bad -gt 0 ]; then
	echo "format.sh: $bad of ${#files[@]} file(s) differ from .clang-format; scripts/format.sh --fix rewrites them" >&2
	exit 1
fi
echo "format.sh: ${#files[@]} file(s) as .clang-format lays them out"
