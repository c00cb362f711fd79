package main

import (
	"bytes"
	"context"
	"regexp"
	"strings"
	"testing"

	"github.com/urfave/cli/v2"
)

// Every command's help renders, and every flag's placeholder is a word in capitals or
// urfave/cli's "value": a backquoted phrase in a flag's usage becomes its placeholder, which
// printed `--plan plan --out` and `--allow-cancel rubberband cancel`.
func TestHelpHasNoStrayPlaceholders(t *testing.T) {
	t.Parallel()
	var app bytes.Buffer
	if code := run(context.Background(), []string{"rubberband", "--help"}, &app, &app); code != 0 {
		t.Fatalf("rubberband --help: exit %d", code)
	}
	caps := regexp.MustCompile(`^[A-Z][A-Z0-9_]*$`)
	quoted := regexp.MustCompile("`([^`]*)`")
	// A flag line: the names, then the placeholder if any, then two spaces and the usage.
	flagLine := regexp.MustCompile(`^\s+(--?[\w-]+(?:, --?[\w-]+)*)(?: (\S.*?))?\s{2,}\S`)
	for _, cmd := range commands() {
		for _, f := range cmd.Flags {
			usage := ""
			if d, ok := f.(cli.DocGenerationFlag); ok {
				usage = d.GetUsage()
			}
			if m := quoted.FindStringSubmatch(usage); m != nil && !caps.MatchString(m[1]) { // urfave/cli's placeholder
				name := m[1]
				t.Errorf("%s --%s: placeholder %q from %q", cmd.Name, f.Names()[0], name, usage)
			}
		}
		var out bytes.Buffer
		if code := run(context.Background(), []string{"rubberband", cmd.Name, "--help"}, &out, &out); code != 0 && !cmd.SkipFlagParsing {
			t.Errorf("%s --help: exit %d\n%s", cmd.Name, code, out.String())
		}
		for _, line := range strings.Split(out.String(), "\n") {
			m := flagLine.FindStringSubmatch(line)
			if m == nil || m[2] == "" {
				continue
			}
			if ph := strings.TrimSuffix(strings.Fields(m[2])[0], ","); ph != "value" && !caps.MatchString(ph) && !strings.HasPrefix(ph, "(") {
				t.Errorf("%s --help: %q", cmd.Name, line)
			}
		}
	}
}
