// Package cliargs is what the CLI does to its arguments before urfave/cli reads them
// (FlagsFirst: a command's flags may follow its arguments). It imports urfave/cli and nothing of
// rubberband.
package cliargs
