package main

import (
	"fmt"

	"github.com/urfave/cli/v2"
)

// The bash and zsh scripts ask the binary itself for its commands and flags
// (urfave/cli's --generate-bash-completion), so they never go stale; arguments complete as files.
const bashCompletion = `# rubberband bash completion: source <(rubberband completion bash)
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

const zshCompletion = `#compdef rubberband
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

func completionCommand() *cli.Command {
	return &cli.Command{
		Name:      "completion",
		Usage:     "print a shell completion script (bash, zsh or fish)",
		ArgsUsage: "SHELL",
		Description: "Load it in the current shell, e.g. `source <(rubberband completion bash)`,\n" +
			"or for good: `rubberband completion fish > ~/.config/fish/completions/rubberband.fish`.",
		Action: func(c *cli.Context) error {
			if c.NArg() != 1 {
				return usageErr("completion needs one SHELL argument: bash, zsh or fish")
			}
			switch sh := c.Args().First(); sh {
			case "bash":
				fmt.Fprint(c.App.Writer, bashCompletion)
			case "zsh":
				fmt.Fprint(c.App.Writer, zshCompletion)
			case "fish":
				script, err := c.App.ToFishCompletion()
				if err != nil {
					return fmt.Errorf("fish completion: %w", err)
				}
				fmt.Fprint(c.App.Writer, script)
			default:
				return usageErr("%q is not a shell this prints completion for (bash, zsh or fish)", sh)
			}
			return nil
		},
	}
}
