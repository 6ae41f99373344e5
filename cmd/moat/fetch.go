package main

import (
	"context"
	"errors"
	"fmt"
	"io"

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
