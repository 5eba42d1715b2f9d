# SPDX-License-Identifier: GPL-2.0
# bash completion for stackpilot(8): commands, options, module names and
# tunable keys. Options, modules and keys are asked of the stackpilot being
# completed (`CMD --help`, `stackpilot tunables`) at completion time, so
# they follow the binary and need neither root nor a running instance.

_stackpilot_modules() {
	"$1" --help 2>/dev/null | awk '/^Modules:/ { m = 1; next } m && NF == 0 { exit } m { print $1 }'
}

_stackpilot() {
	local cur=${COMP_WORDS[COMP_CWORD]} prev=${COMP_WORDS[COMP_CWORD-1]}
	local sp=${COMP_WORDS[0]} cmd=${COMP_WORDS[1]} words mnt
	COMPREPLY=()
	if [ "$COMP_CWORD" -eq 1 ]; then
		COMPREPLY=($(compgen -W "run status get set tunables counters check-config probe --help --version" -- "$cur"))
		return
	fi
	case $prev in
	--pin-path|--metrics-textfile|--state-dir) COMPREPLY=($(compgen -d -- "$cur")); return ;;
	--btf|--config) COMPREPLY=($(compgen -f -- "$cur")); return ;;
	--iface) COMPREPLY=($(compgen -W "$(ls /sys/class/net 2>/dev/null)" -- "$cur")); return ;;
	--log-level) COMPREPLY=($(compgen -W "error warn info debug" -- "$cur")); return ;;
	--interval|--mtu-probing|--metrics-listen) return ;;
	--cgroup)
		# Relative to the cgroup v2 mount, as run takes it; / is the root.
		mnt=$(awk '$3 == "cgroup2" { print $2; exit }' /proc/self/mounts)
		if [[ $cur == /* || -z $mnt ]]; then
			COMPREPLY=($(compgen -d -- "$cur"))
		else
			COMPREPLY=($(cd "$mnt" 2>/dev/null && compgen -d -- "$cur"))
		fi
		return ;;
	--modules)
		# A comma-separated list: complete its last element.
		local pre=
		[[ $cur == *,* ]] && pre=${cur%,*},
		COMPREPLY=($(compgen -P "$pre" -W "all $(_stackpilot_modules "$sp")" -- "${cur##*,}"))
		return ;;
	esac
	if [[ $cur == -* ]]; then
		words=$("$sp" "$cmd" --help 2>/dev/null | grep -o -- '--[a-z][a-z0-9-]*' | sort -u)
		COMPREPLY=($(compgen -W "$words" -- "$cur"))
		return
	fi
	case $cmd in
	get) COMPREPLY=($(compgen -W "$("$sp" tunables 2>/dev/null | cut -f1)" -- "$cur")) ;;
	set)
		COMPREPLY=($(compgen -S = -W "$("$sp" tunables 2>/dev/null | cut -f1)" -- "$cur"))
		compopt -o nospace 2>/dev/null ;;
	tunables|counters|probe) COMPREPLY=($(compgen -W "$(_stackpilot_modules "$sp")" -- "$cur")) ;;
	check-config) COMPREPLY=($(compgen -f -- "$cur")) ;;
	esac
}
complete -F _stackpilot stackpilot
