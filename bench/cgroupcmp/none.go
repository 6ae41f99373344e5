//go:build !hand && !oc

package main

import "errors"

// Built without a tag, it says which to give.
var the impl = none{}

type none struct{}

func (none) name() string { return "none" }

func (none) start(string, int) (func() error, error) {
	return nil, errors.New("build with -tags hand or -tags oc (see the package doc)")
}
