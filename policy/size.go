package policy

import (
	"errors"
	"fmt"
	"math"
	"math/big"
	"strconv"
	"strings"
	"time"
)

// Size is a number of bytes; 0 means unset (no limit).
//
// In TOML a Size is an integer (bytes) or a string: a decimal number, possibly
// with a fraction, followed by an optional unit. Units are binary multiples
// and case-insensitive: K, M, G and T each with an optional "iB" or "B" suffix
// (so "64k", "64KB" and "64KiB" are all 65536), and "B" or nothing for bytes.
type Size int64

// Binary size units.
const (
	B   Size = 1
	KiB      = 1024 * B
	MiB      = 1024 * KiB
	GiB      = 1024 * MiB
	TiB      = 1024 * GiB
)

var sizeUnits = []struct {
	letter string
	mult   Size
}{{"t", TiB}, {"g", GiB}, {"m", MiB}, {"k", KiB}}

// ParseSize parses a size such as "512MiB", "1.5G", "64k" or "4096". A
// fraction of the unit is rounded down to whole bytes; a fractional count of
// bytes, a negative size, a size that does not fit in an int64 and a
// non-zero size that rounds down to 0 bytes (which would mean no limit)
// are errors.
func ParseSize(s string) (Size, error) {
	num, unit := splitNumber(strings.TrimSpace(s))
	if num == "" {
		return 0, fmt.Errorf("invalid size %q: want a number of bytes or a number with a unit, such as \"512MiB\" or \"1.5G\"", s)
	}
	mult, ok := sizeUnit(unit)
	if !ok {
		return 0, fmt.Errorf("invalid size %q: unknown unit %q (units: B, K, M, G, T, optionally written KB or KiB)", s, unit)
	}
	if strings.HasPrefix(num, "-") {
		return 0, fmt.Errorf("invalid size %q: must not be negative", s)
	}
	r, ok := new(big.Rat).SetString(num)
	if !ok {
		return 0, fmt.Errorf("invalid size %q: malformed number %q", s, num)
	}
	r.Mul(r, new(big.Rat).SetInt64(int64(mult)))
	if mult == B && !r.IsInt() {
		return 0, fmt.Errorf("invalid size %q: a byte count must be a whole number", s)
	}
	n := new(big.Int).Quo(r.Num(), r.Denom())
	if !n.IsInt64() {
		return 0, fmt.Errorf("invalid size %q: too large (max %s)", s, Size(math.MaxInt64))
	}
	if n.Sign() == 0 && r.Sign() != 0 {
		return 0, fmt.Errorf("invalid size %q: %w", s, errZeroSize)
	}
	return Size(n.Int64()), nil
}

// errZeroSize refuses a size below one byte: as 0 it would mean no limit
// at all, the opposite of what was asked.
var errZeroSize = errors.New("rounds down to 0 bytes, which means no limit; use at least 1 byte, or 0 for no limit")

// splitNumber splits s into a leading decimal number ("-"? digits ("."
// digits)?) and the rest. num is "" when s does not start with one.
func splitNumber(s string) (num, rest string) {
	i := 0
	if i < len(s) && (s[i] == '-' || s[i] == '+') {
		i++
	}
	digits := 0
	for i < len(s) && s[i] >= '0' && s[i] <= '9' {
		i++
		digits++
	}
	if i < len(s) && s[i] == '.' {
		i++
		frac := 0
		for i < len(s) && s[i] >= '0' && s[i] <= '9' {
			i++
			frac++
		}
		if frac == 0 {
			return "", s
		}
	}
	if digits == 0 {
		return "", s
	}
	return strings.TrimPrefix(s[:i], "+"), strings.TrimSpace(s[i:])
}

func sizeUnit(unit string) (Size, bool) {
	u := strings.ToLower(unit)
	if u == "" || u == "b" {
		return B, true
	}
	for _, su := range sizeUnits {
		if u == su.letter || u == su.letter+"b" || u == su.letter+"ib" {
			return su.mult, true
		}
	}
	return 0, false
}

// String returns the size in the largest binary unit that represents it
// exactly: "512MiB", "1GiB", "1000B", "0B".
func (s Size) String() string {
	if s != 0 {
		for _, su := range sizeUnits {
			if s%su.mult == 0 {
				return strconv.FormatInt(int64(s/su.mult), 10) + strings.ToUpper(su.letter) + "iB"
			}
		}
	}
	return strconv.FormatInt(int64(s), 10) + "B"
}

// MarshalText implements encoding.TextMarshaler with the String form.
func (s Size) MarshalText() ([]byte, error) { return []byte(s.String()), nil }

// UnmarshalText implements encoding.TextUnmarshaler with ParseSize.
func (s *Size) UnmarshalText(b []byte) error {
	v, err := ParseSize(string(b))
	if err != nil {
		return err
	}
	*s = v
	return nil
}

// Duration is a length of time; 0 means unset (no limit).
//
// In TOML a Duration is a string in Go syntax ("90s", "1m30s", "10m"), a
// string holding a number of seconds ("30", "2.5"), or an integer or float
// number of seconds.
type Duration time.Duration

var errNegativeDuration = errors.New("must not be negative")

// ErrDurationTooLong is ParseDuration's error (wrapped) for a well-formed
// duration past the longest Go can hold; callers that parse durations
// another way tell a too long one from a malformed one by it.
var ErrDurationTooLong = errors.New("too long")

// errTooLong says how long a duration may be, the same for every form.
var errTooLong = fmt.Errorf("%w (at most %s)", ErrDurationTooLong, Duration(math.MaxInt64))

// ParseDuration parses a duration in Go syntax ("1m30s") or a plain number of
// seconds ("30", "2.5"). Negative durations are errors.
func ParseDuration(s string) (Duration, error) {
	t := strings.TrimSpace(s)
	if num, rest := splitNumber(t); num != "" && rest == "" {
		f, err := strconv.ParseFloat(num, 64)
		if err != nil {
			return 0, fmt.Errorf("invalid duration %q: %v", s, err)
		}
		d, err := secondsDuration(f)
		if err != nil {
			return 0, fmt.Errorf("invalid duration %q: %w", s, err)
		}
		return d, nil
	}
	d, err := time.ParseDuration(t)
	if err != nil && overflows(t) {
		return 0, fmt.Errorf("invalid duration %q: %w", s, errTooLong)
	}
	if err != nil {
		return 0, fmt.Errorf("invalid duration %q: want Go syntax such as \"90s\", \"1m30s\" or \"2h\", or a number of seconds", s)
	}
	if d < 0 {
		return 0, fmt.Errorf("invalid duration %q: %w", s, errNegativeDuration)
	}
	if d == 0 && strings.ContainsAny(t, "123456789") {
		return 0, fmt.Errorf("invalid duration %q: %w", s, errZeroDuration)
	}
	return Duration(d), nil
}

// overflows reports whether t is a well-formed Go duration that
// time.ParseDuration refused only for its size: each number scaled
// down until it parses, it does.
func overflows(t string) bool {
	var b strings.Builder
	digits := false
	for _, r := range t {
		if r >= '0' && r <= '9' {
			if !digits {
				b.WriteByte('1') // one in place of each run of digits
			}
			digits = true
			continue
		}
		digits = false
		b.WriteRune(r)
	}
	_, err := time.ParseDuration(b.String())
	return err == nil
}

// errZeroDuration refuses a value below the resolution: as 0 it would
// mean no limit at all, the opposite of what was asked.
var errZeroDuration = errors.New("rounds to zero, which means no limit; use at least 1ns, or 0 for no limit")

// errZeroNumber refuses a number too small for a float64 (1e-400,
// 0x1p-2000), which reads as 0: as a limit 0 means none at all.
var errZeroNumber = errors.New("rounds to zero, which means no limit; write 0 for no limit")

// zeroFloat reports whether text, a TOML or JSON float, names a non-zero
// number that reads as 0 (see errZeroNumber).
func zeroFloat(text string) bool {
	t := strings.ReplaceAll(text, "_", "") // TOML's digit separators
	f, err := strconv.ParseFloat(t, 64)
	return err == nil && f == 0 && nonZeroText(t)
}

// nonZeroText reports whether text, a number that parsed to 0, names a
// non-zero number: one too small for a float64, such as 1e-400 or
// 0x1p-2000. Its mantissa has a digit other than 0.
func nonZeroText(text string) bool {
	t := strings.ToLower(strings.TrimLeft(strings.TrimSpace(text), "+-"))
	if h, ok := strings.CutPrefix(t, "0x"); ok {
		m, _, _ := strings.Cut(h, "p")
		return strings.ContainsAny(m, "123456789abcdef")
	}
	m, _, _ := strings.Cut(t, "e")
	return strings.ContainsAny(m, "123456789")
}

// secondsDuration converts a number of seconds to a Duration.
func secondsDuration(sec float64) (Duration, error) {
	switch {
	case math.IsNaN(sec) || math.IsInf(sec, 0):
		return 0, errors.New("not a number of seconds")
	case sec < 0:
		return 0, errNegativeDuration
	case sec*float64(time.Second) >= math.MaxInt64:
		return 0, errTooLong
	}
	d := Duration(math.Round(sec * float64(time.Second)))
	if d == 0 && sec > 0 {
		return 0, errZeroDuration
	}
	return d, nil
}

// String returns the duration in Go syntax without trailing zero units:
// "10m", "1m30s", "1h", "1.5s", "0s".
func (d Duration) String() string {
	s := time.Duration(d).String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}

// MarshalText implements encoding.TextMarshaler with the String form.
func (d Duration) MarshalText() ([]byte, error) { return []byte(d.String()), nil }

// UnmarshalText implements encoding.TextUnmarshaler with ParseDuration.
func (d *Duration) UnmarshalText(b []byte) error {
	v, err := ParseDuration(string(b))
	if err != nil {
		return err
	}
	*d = v
	return nil
}
