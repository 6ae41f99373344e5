package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/moatbox/moat/egress"
)

// cmdFetch: moat fetch URL writes the body of a public HTTPS GET to stdout
// (egress.Fetcher decides what may be fetched).
func cmdFetch(args []string, stdout, stderr io.Writer) int {
	args, ok, code := operands("fetch", "usage: moat fetch URL (public https:// only: no redirects, 5 s, 1 MiB, no private addresses)", args, 1, 1, stderr)
	if !ok {
		return code
	}
	res, err := (&egress.Fetcher{}).Fetch(context.Background(), args[0])
	var fe *egress.FetchError
	if errors.As(err, &fe) {
		fmt.Fprintf(stderr, "moat: %v\n", fe)
		if strings.Contains(fe.Reason, "allow_cidrs") {
			// The proxy's reason speaks of a policy this command has not.
			fmt.Fprintln(stderr, "moat: moat fetch takes no policy, so [network] allow_cidrs cannot open an address to it: it fetches public addresses only (a session's fetch follows its policy's [network])")
		}
		return 1
	}
	if err != nil {
		fmt.Fprintf(stderr, "moat: fetch: %v\n", err)
		return 1
	}
	stdout.Write(res.Body)
	if res.Status >= 400 {
		fmt.Fprintf(stderr, "moat: %s answered %d\n", args[0], res.Status)
		return 1
	}
	return 0
}
