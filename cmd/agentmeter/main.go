// Command agentmeter is the agent runtime's CLI. It is the only place that wires the
// runtime, the middleware chain and the gateway together (README.md).
package main

import (
	"fmt"
	"io"
	"maps"
	"os"
	"slices"
)

// version is set at build time with -ldflags "-X main.version=...".
var version = "0.1.0-dev"

// command is one subcommand; each parses its own flags from args.
type command struct {
	summary string
	run     func(args []string, stdout, stderr io.Writer) int
}

// commands is filled by each subcommand's file in its init, so adding one never edits main.
var commands = map[string]command{
	"version": {summary: "print the version", run: func(_ []string, stdout, _ io.Writer) int {
		fmt.Fprintln(stdout, "agentmeter", version)
		return 0
	}},
}

func main() {
	os.Exit(dispatch(os.Args[1:], os.Stdout, os.Stderr))
}

func dispatch(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		usage(stderr)
		if len(args) == 0 {
			return 2
		}
		return 0
	}
	cmd, ok := commands[args[0]]
	if !ok {
		fmt.Fprintf(stderr, "agentmeter: unknown command %q\n\n", args[0])
		usage(stderr)
		return 2
	}
	return cmd.run(args[1:], stdout, stderr)
}

func usage(w io.Writer) {
	fmt.Fprintln(w, "usage: agentmeter <command> [flags]")
	fmt.Fprintln(w, "\ncommands:")
	for _, name := range sortedCommandNames() {
		fmt.Fprintf(w, "  %-10s %s\n", name, commands[name].summary)
	}
}

func sortedCommandNames() []string {
	names := slices.Sorted(maps.Keys(commands))
	return names
}
