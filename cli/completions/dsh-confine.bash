# bash completion for dsh-confine. Installed as share/bash-completion/completions/dsh-confine;
# works without the bash-completion package too (source this file), which only adds the
# completion of PROGRAM's own arguments.

_dsh_confine_sessions() {
    local state=${DSH_CONFINE_STATE_DIR:-} dir
    if [[ -z $state ]]; then
        if [[ ${XDG_STATE_HOME:-} == /* ]]; then
            state=$XDG_STATE_HOME/dsh-confine
        elif [[ ${HOME:-} == /* ]]; then
            state=$HOME/.local/state/dsh-confine
        fi
    fi
    [[ -n $state && -d $state/sessions ]] || return 0
    for dir in "$state"/sessions/*/; do
        [[ -d $dir ]] || continue
        dir=${dir%/}
        printf '%s\n' "${dir##*/}"
    done
}

_dsh_confine_words() {
    local IFS=$' \t\n'
    COMPREPLY=($(compgen -W "$1" -- "$2"))
}

_dsh_confine() {
    local cur=${COMP_WORDS[COMP_CWORD]} prev=
    ((COMP_CWORD > 0)) && prev=${COMP_WORDS[COMP_CWORD - 1]}
    # COMP_WORDBREAKS splits `--mode=wo` into `--mode` `=` `wo`.
    [[ $cur == = ]] && cur=
    [[ $prev == = ]] && ((COMP_CWORD >= 2)) && prev=${COMP_WORDS[COMP_CWORD - 2]}

    local takes_value=" --mode --workspace-root --session --config --backend --format --log-level --report --report-fd
        --plan --exit-code --stderr --cwd --temp-dir --private-temp-base --status-fd --max-abi "
    takes_value=${takes_value//$'\n'/ }

    # What the words before the cursor are: the subcommand, the session action and its
    # arguments, and where PROGRAM starts (after `--`, or at the first word that is neither an
    # option, an option's value nor a subcommand).
    local i word sub= action= positional=0 program=0 skip=0 main_options=0
    for ((i = 1; i < COMP_CWORD; i++)); do
        word=${COMP_WORDS[i]}
        if ((skip)); then
            skip=0
            continue
        fi
        if [[ $word == = ]]; then
            skip=1
            continue
        fi
        if [[ $word == -- ]]; then
            program=$((i + 1))
            break
        fi
        if [[ $word == -* ]]; then
            [[ $takes_value == *" $word "* && ${COMP_WORDS[i + 1]:-} != = ]] && skip=1
            [[ -z $sub ]] && main_options=1
            continue
        fi
        if [[ -z $sub ]]; then
            case $word in
                run | policy | classify | doctor | session | landlock-exec) sub=$word ;;
                *) program=$i && break ;;
            esac
        elif [[ $sub == session && -z $action ]]; then
            action=$word
        elif [[ $sub == run || $sub == landlock-exec ]]; then
            program=$i
            break
        else
            ((positional++))
        fi
    done

    if ((program)); then
        if declare -F _command_offset >/dev/null; then
            _command_offset "$program"
        elif ((program == COMP_CWORD)); then
            _dsh_confine_words "$(compgen -c -- "$cur" | sort -u)" "$cur"
        else
            compopt -o filenames 2>/dev/null
            COMPREPLY=($(compgen -f -- "$cur"))
        fi
        return 0
    fi

    case $prev in
        --mode)
            _dsh_confine_words "read-only workspace-write danger-full-access" "$cur"
            return 0 ;;
        --backend)
            _dsh_confine_words "bwrap landlock seatbelt restricted-token" "$cur"
            return 0 ;;
        --format)
            if [[ $sub == classify ]]; then
                _dsh_confine_words "text json" "$cur"
            else
                _dsh_confine_words "json shell" "$cur"
            fi
            return 0 ;;
        --log-level)
            _dsh_confine_words "trace debug info warn error critical off" "$cur"
            return 0 ;;
        --session)
            _dsh_confine_words "$(_dsh_confine_sessions)" "$cur"
            return 0 ;;
        --workspace-root | --cwd | --temp-dir | --private-temp-base)
            compopt -o filenames 2>/dev/null
            COMPREPLY=($(compgen -d -- "$cur"))
            return 0 ;;
        --config | --plan | --stderr | --report)
            compopt -o filenames 2>/dev/null
            COMPREPLY=($(compgen -f -- "$cur"))
            return 0 ;;
        --report-fd | --exit-code | --status-fd | --max-abi)
            return 0 ;;
    esac

    local policy="--mode --workspace-root --session --config"
    local options
    case $sub in
        "") options="$policy --backend --require-full --print --format -v --verbose --log-level --version --help" ;;
        run) options="$policy --backend --require-full --report --report-fd --help" ;;
        policy) options="$policy --help" ;;
        classify) options="--plan --backend --exit-code --stderr --format --config --help" ;;
        doctor) options="--json --verify --config --help" ;;
        landlock-exec) options="--mode --workspace-root --temp-dir --private-temp-base --status-fd --max-abi --help" ;;
        session)
            case $action in
                "")
                    _dsh_confine_words "start mode show end" "$cur"
                    return 0 ;;
                start) options="--cwd --help" ;;
                mode)
                    if [[ $cur != -* ]]; then
                        if ((positional == 0)); then
                            _dsh_confine_words "$(_dsh_confine_sessions)" "$cur"
                        elif ((positional == 1)); then
                            _dsh_confine_words "read-only workspace-write danger-full-access" "$cur"
                        fi
                        return 0
                    fi
                    options="--help" ;;
                show | end)
                    if [[ $cur != -* ]]; then
                        ((positional == 0)) && _dsh_confine_words "$(_dsh_confine_sessions)" "$cur"
                        return 0
                    fi
                    options="--help" ;;
            esac ;;
    esac

    if [[ $cur == -* ]]; then
        _dsh_confine_words "$options --" "$cur"
    elif [[ -z $sub ]]; then
        # A subcommand (not after the main job's options, which a subcommand refuses), or
        # PROGRAM itself (`dsh-confine make`), once its first letters are typed.
        local words=
        ((main_options)) || words="run policy classify doctor session"
        [[ -n $cur ]] && words+=$'\n'$(compgen -c -- "$cur" | sort -u)
        _dsh_confine_words "$words" "$cur"
    elif [[ $sub == run && -n $cur ]]; then
        _dsh_confine_words "$(compgen -c -- "$cur" | sort -u)" "$cur"
    fi
    return 0
}

complete -F _dsh_confine dsh-confine
