package cliargs

import (
	"slices"
	"strings"
	"testing"

	"github.com/urfave/cli/v2"
)

// Flags move before the arguments, a flag's value with it; "--" still ends the flags; a
// subcommand's flags are its own; what passes its arguments on, a subcommand group's own
// argument, and completion are left alone.
func TestFlagsFirst(t *testing.T) {
	plan := &cli.Command{Name: "plan", Flags: []cli.Flag{&cli.StringFlag{Name: "planner"}, &cli.BoolFlag{Name: "json"}}}
	add := &cli.Command{Name: "add", Flags: []cli.Flag{&cli.IntFlag{Name: "gpus"}}}
	teams := &cli.Command{Name: "teams", Subcommands: []*cli.Command{add}}
	server := &cli.Command{Name: "server", Subcommands: []*cli.Command{teams}, Flags: []cli.Flag{&cli.StringFlag{Name: "addr"}}}
	trainer := &cli.Command{Name: "trainer", SkipFlagParsing: true}
	cmds := []*cli.Command{plan, server, trainer}
	for _, tc := range []struct{ in, want string }{
		{"rb plan SPEC --planner optimal", "rb plan --planner optimal -- SPEC"},
		{"rb plan SPEC --json --planner=greedy", "rb plan --json --planner=greedy -- SPEC"},
		{"rb plan SPEC -- --json", "rb plan -- SPEC --json"},
		{"rb plan --json", "rb plan --json"},
		{"rb server teams add ml --gpus 8", "rb server teams add --gpus 8 -- ml"},
		{"rb server teams x --addr y", "rb server teams x --addr y"},
		{"rb trainer synthetic --spec s", "rb trainer synthetic --spec s"},
		{"rb plan SPEC --generate-bash-completion", "rb plan SPEC --generate-bash-completion"},
		{"rb nosuch a --b", "rb nosuch a --b"},
		{"rb plan", "rb plan"},
	} {
		if got := FlagsFirst(cmds, strings.Fields(tc.in)); !slices.Equal(got, strings.Fields(tc.want)) {
			t.Errorf("%s: %q, want %q", tc.in, got, tc.want)
		}
	}
}
