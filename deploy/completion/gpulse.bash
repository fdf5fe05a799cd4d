# bash completion for gpulse (installed as
# /usr/share/bash-completion/completions/gpulse).
#
# The commands are listed here (tests/integration/test_completion.sh
# checks the list against `gpulse --help`); each command's options are
# read from its own --help the first time they are asked for, so they
# follow the command line as it changes.

_gpulse_commands="status top record diagnose report bench fleet rules query alerts kernels run trace help"

# The long options of one command, from `gpulse CMD --help`, cached.
_gpulse_options()
{
	local cmd=$1 var="_gpulse_opts_${1//-/_}"
	if [[ -z ${!var-} ]]; then
		local text
		text=$(command "${_gpulse_prog:-gpulse}" "$cmd" --help 2>/dev/null)
		printf -v "$var" '%s' "$(grep -o -- '--[a-z][a-z0-9-]*' <<<"$text" | sort -u | tr '\n' ' ')"
	fi
	printf '%s' "${!var}"
}

_gpulse()
{
	local cur prev words cword
	if declare -F _init_completion >/dev/null; then
		_init_completion || return
	else
		cur=${COMP_WORDS[COMP_CWORD]}
		prev=${COMP_WORDS[COMP_CWORD-1]}
		words=("${COMP_WORDS[@]}")
		cword=$COMP_CWORD
	fi
	_gpulse_prog=${words[0]}

	# The command: the first word after the global options.
	local i cmd="" cmd_at=0
	for ((i = 1; i < cword; i++)); do
		case ${words[i]} in
		--url | --token-file) ((i++)) ;;
		--url=* | --token-file=* | -*) ;;
		*) cmd=${words[i]}; cmd_at=$i; break ;;
		esac
	done

	if [[ -z $cmd ]]; then
		case $prev in
		--token-file) COMPREPLY=($(compgen -f -- "$cur")); return ;;
		--url) return ;;
		esac
		if [[ $cur == -* ]]; then
			COMPREPLY=($(compgen -W "--url --token-file --help --version" -- "$cur"))
		else
			COMPREPLY=($(compgen -W "$_gpulse_commands" -- "$cur"))
		fi
		return
	fi

	# `gpulse run [OPTIONS] -- CMD ARGS`: after "--", a command line.
	for ((i = cmd_at + 1; i < cword; i++)); do
		if [[ ${words[i]} == -- ]]; then
			if ((i + 1 == cword)); then
				COMPREPLY=($(compgen -c -- "$cur"))
			else
				COMPREPLY=($(compgen -f -- "$cur"))
			fi
			return
		fi
	done

	case $cmd in
	help)
		((cword == cmd_at + 1)) && COMPREPLY=($(compgen -W "$_gpulse_commands" -- "$cur"))
		return ;;
	rules)
		if ((cword == cmd_at + 1)); then
			COMPREPLY=($(compgen -W "test check" -- "$cur"))
		else
			COMPREPLY=($(compgen -f -- "$cur"))
		fi
		return ;;
	report)
		if ((cword == cmd_at + 1)) && [[ $cur != -* ]]; then
			COMPREPLY=($(compgen -W "capacity" -- "$cur"))
			return
		fi ;;
	esac

	case $prev in
	--output | -o | --replay | --device | --db | --token-file | --compare | --cublaslt | \
		--cuda-library | --nvml-library | --storage-path | --socket)
		COMPREPLY=($(compgen -f -- "$cur"))
		return ;;
	--format) COMPREPLY=($(compgen -W "text json html" -- "$cur")); return ;;
	--state) COMPREPLY=($(compgen -W "firing pending" -- "$cur")); return ;;
	--mode) COMPREPLY=($(compgen -W "full" -- "$cur")); return ;;
	--focus) COMPREPLY=($(compgen -W "profiler-api nvtx:" -- "$cur")); return ;;
	esac
	if [[ $cur == -* ]]; then
		COMPREPLY=($(compgen -W "$(_gpulse_options "$cmd") --help" -- "$cur"))
	fi
}
complete -F _gpulse gpulse
