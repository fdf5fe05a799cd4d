# Man pages and shell completion follow the command line: every command
# `gpulse --help` lists has a generated gpulse-COMMAND(1) page that man
# renders without a warning, gpulsed(8) and gpulse(1) exist; the bash
# completion, sourced into a bash, is registered for gpulse and completes
# the commands, a prefix, the options of a command (all those its --help
# names) and the words after `rules`; the zsh completion parses, lists
# the same commands and offers each command's options.
source "$(dirname "$0")/lib.sh"
: "${GPULSE_BUILD_DIR:?}"
MAN="$GPULSE_BUILD_DIR/man"
COMP="$GPULSE_SOURCE_DIR/deploy/completion"

cmds=$("$GPULSE" --help | awk '/^Commands:/ {on=1; next} on && /^  [a-z]/ {print $1} on && /^$/ {exit}')
[ "$(wc -w <<<"$cmds")" -ge 10 ] || fail "too few commands in gpulse --help: $cmds"

check_page() { # FILE NAME
	[ -s "$1" ] || fail "no man page $1"
	grep -q "^\\.SH NAME" "$1" || fail "$1 has no NAME section"
	grep -A1 '^\.SH NAME' "$1" | grep -q "^$2 \\\\- " || fail "$1's NAME is not $2: $(grep -A1 '^.SH NAME' "$1")"
	local warn
	# Without libfaketime (the shifted-clock stages preload it): man-db's
	# seccomp sandbox refuses the semaphore it opens. Rendering reads no clock.
	warn=$(env -u LD_PRELOAD LC_ALL=C.UTF-8 MANWIDTH=80 man --warnings -l "$1" 2>&1 >/dev/null) ||
		fail "man -l $1 failed: $warn"
	[ -z "$warn" ] || fail "man warns on $1: $warn"
}
check_page "$MAN/gpulsed.8" gpulsed
# Each option of gpulsed --help is an item of its own (.TP then the option),
# not folded into the description: help2man folds option lines into the
# paragraph before them when no blank line separates them.
opts=$("$GPULSED" --help | grep -oE '^ {2,}(-[a-zA-Z], )?--[a-z][a-z-]*' | grep -oE -- '--[a-z][a-z-]*')
[ "$(wc -w <<<"$opts")" -ge 8 ] || fail "too few options in gpulsed --help: $opts"
items=$(grep -A1 '^\.TP' "$MAN/gpulsed.8" | sed 's/\\-/-/g; s/\\f[BRI]//g')
for o in $opts; do
	grep -qE -- "(^|, )$o( |$)" <<<"$items" || fail "gpulsed.8: $o is not an option item of its own"
done
check_page "$MAN/gpulse.1" gpulse
for c in $cmds; do
	check_page "$MAN/gpulse-$c.1" "gpulse-$c"
	# The page is the command's own help, not a generic one.
	first=$("$GPULSE" "$c" --help 2>&1 | grep -m1 -o -- '--[a-z][a-z-]*' || true)
	[ -z "$first" ] || grep -q -- "${first//-/\\\\-}" "$MAN/gpulse-$c.1" ||
		grep -q -- "$first" "$MAN/gpulse-$c.1" || fail "gpulse-$c.1 lacks $first from its --help"
	grep -q "gpulse-$c (1)" "$MAN/gpulse.1" || grep -q "gpulse\\\\-$c" "$MAN/gpulse.1" ||
		fail "gpulse(1) does not point to gpulse-$c(1)"
done
# No page for a command that is gone.
for p in "$MAN"/gpulse-*.1; do
	c=${p##*/gpulse-}; c=${c%.1}
	grep -qx "$c" <<<"$cmds" || fail "man page for a command gpulse does not have: $p"
done

# bash: registered, and completing as asked. Run with and without
# bash-completion's helpers (_init_completion), which a host may lack.
export PATH="$(dirname "$GPULSE"):$PATH"
[ "$(basename "$GPULSE")" = gpulse ] || fail "GPULSE is not named gpulse: $GPULSE"
complete_words() { # PRELUDE WORDS... : prints COMPREPLY, one a line
	local prelude=$1
	shift
	bash --norc --noprofile -c "$prelude
		source '$COMP/gpulse.bash'
		COMP_WORDS=(\"\$@\"); COMP_CWORD=\$((\${#COMP_WORDS[@]} - 1))
		COMP_LINE=\"\${COMP_WORDS[*]}\"; COMP_POINT=\${#COMP_LINE}
		_gpulse; printf '%s\n' \"\${COMPREPLY[@]}\"" bash "$@"
}
preludes=("")
[ -f /usr/share/bash-completion/bash_completion ] &&
	preludes+=("source /usr/share/bash-completion/bash_completion")
for pre in "${preludes[@]}"; do
	reg=$(bash --norc --noprofile -c "$pre
		source '$COMP/gpulse.bash'; complete -p gpulse")
	[ "$reg" = "complete -F _gpulse gpulse" ] || fail "complete -p gpulse: $reg"
	got=$(complete_words "$pre" gpulse "" | sort)
	want=$(printf '%s\n' $cmds help | sort)
	[ "$got" = "$want" ] || fail "commands completed ($pre): $(echo $got) want $(echo $want)"
	[ "$(complete_words "$pre" gpulse --url http://x st)" = status ] || fail "prefix st"
	[ "$(complete_words "$pre" gpulse rules "" | sort | tr '\n' ' ')" = "check test " ] || fail "rules words"
	[ "$(complete_words "$pre" gpulse help dia)" = diagnose ] || fail "help COMMAND"
	for c in query report bench top; do
		got=$(complete_words "$pre" gpulse "$c" --)
		for o in $("$GPULSE" "$c" --help 2>&1 | grep -o -- '--[a-z][a-z0-9-]*' | sort -u); do
			grep -qx -- "$o" <<<"$got" || fail "gpulse $c: $o not completed ($pre): $(echo $got)"
		done
	done
	[ "$(complete_words "$pre" gpulse report capacity --format h)" = html ] || fail "--format value"
	[ "$(complete_words "$pre" gpulse alerts --state f)" = firing ] || fail "--state value"
done

# zsh: it parses, and lists exactly the commands gpulse has (plus help).
if command -v zsh >/dev/null; then
	zsh -n "$COMP/_gpulse" || fail "_gpulse does not parse"
fi
zcmds=$(sed -n "s/^    '\([a-z]*\):.*/\1/p" "$COMP/_gpulse" | sort)
[ "$zcmds" = "$(printf '%s\n' $cmds help | sort)" ] || fail "zsh commands: $(echo $zcmds)"
# zsh's option completion of a command offers every option its --help
# names (the completion system's _describe and _call_program stubbed).
if command -v zsh >/dev/null; then
	for c in query report bench; do
		got=$(zsh -fc '_call_program() { shift; "$@"; }; _describe() { shift 3; print -l -- ${(P)1}; }
			_files() { :; }; source <(sed -n "/^_gpulse_cmd_options() {/,/^}/p" "$1"); _gpulse_cmd_options "$2"' \
			zsh "$COMP/_gpulse" "$c")
		for o in $("$GPULSE" "$c" --help 2>&1 | grep -o -- '--[a-z][a-z0-9-]*' | sort -u); do
			grep -qx -- "$o" <<<"$got" || fail "zsh: gpulse $c: $o not offered: $(echo $got)"
		done
	done
fi
echo ok
