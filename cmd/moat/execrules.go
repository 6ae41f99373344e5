package main

import (
	"fmt"
	"io"

	"github.com/moatbox/moat/client"
	"github.com/moatbox/moat/sandbox"
	"github.com/moatbox/moat/workspace"
)

// printRulesRefused says on stderr which programs a session's command
// started that the rules refused, and what the client dropped from its
// output to the terminal, as moat run does for its own.
func printRulesRefused(stderr io.Writer, denials []client.Denial) {
	var refused, dropped []string
	for _, d := range denials {
		switch d.Layer {
		case sandbox.LayerRules:
			refused = append(refused, fmt.Sprintf("%s ×%d (%s)", d.What, d.Count, d.Rule))
		case client.LayerTerminal:
			dropped = append(dropped, fmt.Sprintf("%s ×%d", d.What, d.Count))
		}
	}
	if len(refused) > 0 {
		fmt.Fprintf(stderr, "moat exec: the rules refused to start: %s\n", workspace.EscapeText(firstOf(refused, maxListed)))
	}
	printDropped(stderr, "exec", dropped)
}

// printDropped says on stderr what the terminal filter dropped from the
// output of moat's command cmd, each entry a kind and its count.
func printDropped(stderr io.Writer, cmd string, dropped []string) {
	if len(dropped) > 0 {
		fmt.Fprintf(stderr, "moat %s: dropped from the output to the terminal: %s (pipe the output to see it as written)\n", cmd, workspace.EscapeText(firstOf(dropped, maxListed)))
	}
}

// terminalOutput returns stdout filtered where it is a terminal, as moat
// exec's output is, and a func that ends the filter and says on stderr
// what it dropped, as moat's command cmd.
func terminalOutput(stdout, stderr io.Writer, cmd string) (io.Writer, func()) {
	out, _, done := client.TerminalOutput(stdout, nil)
	return out, func() {
		var dropped []string
		for _, d := range done() {
			dropped = append(dropped, fmt.Sprintf("%s ×%d", d.What, d.Count))
		}
		printDropped(stderr, cmd, dropped)
	}
}
