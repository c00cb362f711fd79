package cliargs

import (
	"strings"

	"github.com/urfave/cli/v2"
)

// FlagsFirst moves a subcommand's flags before its arguments, because urfave/cli stops reading
// flags at the first argument and the usage `rubberband plan SPEC --planner optimal` puts them
// after it. "--" still ends the flags.
func FlagsFirst(cmds []*cli.Command, args []string) []string {
	if len(args) < 3 || args[len(args)-1] == "--generate-bash-completion" { // completion reads its flag last
		return args
	}
	// The command, or the subcommand (server teams add) the leading arguments name.
	var cmd *cli.Command
	at := 1
	for at < len(args) {
		var next *cli.Command
		for _, c := range cmds {
			if c.HasName(args[at]) {
				next = c
			}
		}
		if next == nil {
			break
		}
		cmd, cmds, at = next, next.Subcommands, at+1
	}
	if cmd == nil || cmd.SkipFlagParsing || (len(cmd.Subcommands) > 0 && at < len(args) && !strings.HasPrefix(args[at], "-")) {
		return args // commands that pass their arguments on parse their own flags
	}
	takesValue := map[string]bool{}
	for _, f := range cmd.Flags {
		_, isBool := f.(*cli.BoolFlag)
		for _, n := range f.Names() {
			takesValue[n] = !isBool
		}
	}
	flags, positional := []string{}, []string{}
	rest := args[at:]
	for i := 0; i < len(rest); i++ {
		a := rest[i]
		switch {
		case a == "--":
			positional = append(positional, rest[i+1:]...)
			i = len(rest)
		case len(a) > 1 && a[0] == '-':
			flags = append(flags, a)
			name := strings.TrimLeft(a, "-")
			if !strings.Contains(name, "=") && takesValue[name] && i+1 < len(rest) {
				flags = append(flags, rest[i+1])
				i++
			}
		default:
			positional = append(positional, a)
		}
	}
	out := append(append([]string(nil), args[:at]...), flags...)
	if len(positional) > 0 {
		out = append(append(out, "--"), positional...)
	}
	return out
}
