package main

import (
	"fmt"
	"io"

	"github.com/moatbox/moat/client"
	"github.com/moatbox/moat/sandbox"
	"github.com/moatbox/moat/workspace"
)

// printRulesRefused says on stderr which programs a session's command
// started that the rules refused, as moat run does for its own.
func printRulesRefused(stderr io.Writer, denials []client.Denial) {
	var refused []string
	for _, d := range denials {
		if d.Layer == sandbox.LayerRules {
			refused = append(refused, fmt.Sprintf("%s ×%d (%s)", d.What, d.Count, d.Rule))
		}
	}
	if len(refused) > 0 {
		fmt.Fprintf(stderr, "moat exec: the rules refused to start: %s\n", workspace.EscapeText(firstOf(refused, maxListed)))
	}
}
