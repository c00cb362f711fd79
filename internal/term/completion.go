package term

// BashCompletion and ZshCompletion are `rubberband completion`'s scripts. They ask the binary
// itself for its commands and flags (urfave/cli's --generate-bash-completion), so they never go
// stale; arguments complete as files.
const BashCompletion = `# rubberband bash completion: source <(rubberband completion bash)
_rubberband() {
  local cur="${COMP_WORDS[COMP_CWORD]}" words
  if [[ "$cur" == -* ]]; then
    words=$("${COMP_WORDS[@]:0:COMP_CWORD}" "$cur" --generate-bash-completion 2>/dev/null)
  else
    words=$("${COMP_WORDS[@]:0:COMP_CWORD}" --generate-bash-completion 2>/dev/null)
  fi
  COMPREPLY=($(compgen -W "$words" -- "$cur"))
  if [[ ${#COMPREPLY[@]} -eq 0 ]]; then
    COMPREPLY=($(compgen -f -- "$cur"))
  fi
}
complete -o filenames -F _rubberband rubberband
`

const ZshCompletion = `#compdef rubberband
# rubberband zsh completion: source <(rubberband completion zsh)
_rubberband() {
  local -a opts
  local cur=${words[-1]}
  if [[ "$cur" == -* ]]; then
    opts=("${(@f)$(_CLI_ZSH_AUTOCOMPLETE_HACK=1 ${words[@]:0:#words[@]-1} $cur --generate-bash-completion 2>/dev/null)}")
  else
    opts=("${(@f)$(_CLI_ZSH_AUTOCOMPLETE_HACK=1 ${words[@]:0:#words[@]-1} --generate-bash-completion 2>/dev/null)}")
  fi
  if [[ -n "${opts[1]}" ]]; then
    _describe 'values' opts
  else
    _files
  fi
}
compdef _rubberband rubberband
`
