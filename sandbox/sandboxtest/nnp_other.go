//go:build !linux

package sandboxtest

import "errors"

func setNoNewPrivs() error { return errors.ErrUnsupported }
