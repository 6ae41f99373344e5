package policy

import (
	"math"
	"strings"
	"testing"
	"time"
)

func TestParseSize(t *testing.T) {
	tests := []struct {
		in   string
		want Size
	}{
		{"0", 0},
		{"4096", 4096},
		{"4096B", 4096},
		{"4096b", 4096},
		{"64k", 64 * KiB},
		{"64K", 64 * KiB},
		{"64KB", 64 * KiB},
		{"64KiB", 64 * KiB},
		{"64kib", 64 * KiB},
		{"512M", 512 * MiB},
		{"512m", 512 * MiB},
		{"512MiB", 512 * MiB},
		{"512MB", 512 * MiB},
		{"1G", GiB},
		{"1GiB", GiB},
		{"1.5G", GiB + GiB/2},
		{"0.5K", 512},
		{"1.3K", 1331}, // fractions of a unit round down to whole bytes
		{"2T", 2 * TiB},
		{" 8 MiB ", 8 * MiB},
		{"+1K", KiB},
		{"8388607T", 8388607 * TiB},
		{"9223372036854775807", math.MaxInt64},
		// Controls for the refusal of sizes that round down to 0: zero
		// written any way is still 0 (no limit), and the smallest
		// fraction of a unit that is a byte is a byte.
		{"0K", 0},
		{"0.0G", 0},
		{"0.001K", 1},
		{"1K", KiB},
	}
	for _, tt := range tests {
		got, err := ParseSize(tt.in)
		if err != nil || got != tt.want {
			t.Errorf("ParseSize(%q) = %d, %v; want %d", tt.in, got, err, tt.want)
		}
	}
}

func TestParseSizeErrors(t *testing.T) {
	tests := []struct {
		in, wantErr string
	}{
		{"", "want a number"},
		{"M", "want a number"},
		{"-1", "negative"},
		{"-1G", "negative"},
		{"1.5", "whole number"},
		{"1.5B", "whole number"},
		{"12 parsecs", `unknown unit "parsecs"`},
		{"1P", `unknown unit "P"`},
		{"1GiBB", "unknown unit"},
		{"1.G", "want a number"},
		{".5G", "want a number"},
		{"1e3", "unknown unit"},
		{"0x10", "unknown unit"},
		{"8388608T", "too large"},
		{"9223372036854775808", "too large"},
		{"99999999999999999999999999G", "too large"},
		// A non-zero size below one byte would be 0, no limit at all.
		{"0.0001K", "rounds down to 0 bytes"},
		{"0.0001KiB", "rounds down to 0 bytes"},
		{"0.0004k", "rounds down to 0 bytes"},
		{"0.0000000001G", "rounds down to 0 bytes"},
		{"0.00000000000000000001T", "rounds down to 0 bytes"},
	}
	for _, tt := range tests {
		got, err := ParseSize(tt.in)
		if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
			t.Errorf("ParseSize(%q) = %d, %v; want error containing %q", tt.in, got, err, tt.wantErr)
		}
	}
}

func TestSizeString(t *testing.T) {
	tests := []struct {
		in   Size
		want string
	}{
		{0, "0B"},
		{1000, "1000B"},
		{KiB, "1KiB"},
		{512 * MiB, "512MiB"},
		{GiB, "1GiB"},
		{GiB + GiB/2, "1536MiB"},
		{3 * TiB, "3TiB"},
		{1025, "1025B"},
	}
	for _, tt := range tests {
		if got := tt.in.String(); got != tt.want {
			t.Errorf("Size(%d).String() = %q, want %q", int64(tt.in), got, tt.want)
		}
		if back, err := ParseSize(tt.want); err != nil || back != tt.in {
			t.Errorf("ParseSize(%q) = %d, %v; want %d", tt.want, back, err, tt.in)
		}
	}
}

func TestParseDuration(t *testing.T) {
	tests := []struct {
		in   string
		want time.Duration
	}{
		{"90s", 90 * time.Second},
		{"1m30s", 90 * time.Second},
		{"10m", 10 * time.Minute},
		{"2h", 2 * time.Hour},
		{"1.5s", 1500 * time.Millisecond},
		{"250ms", 250 * time.Millisecond},
		{"30", 30 * time.Second},
		{"2.5", 2500 * time.Millisecond},
		{" 0 ", 0},
		{"0s", 0},
	}
	for _, tt := range tests {
		got, err := ParseDuration(tt.in)
		if err != nil || time.Duration(got) != tt.want {
			t.Errorf("ParseDuration(%q) = %v, %v; want %v", tt.in, got, err, tt.want)
		}
	}
}

func TestParseDurationErrors(t *testing.T) {
	tests := []struct {
		in, wantErr string
	}{
		{"", "want Go syntax"},
		{"forever", "want Go syntax"},
		{"5 minutes", "want Go syntax"},
		{"-5s", "negative"},
		{"-5", "negative"},
		{"1e3", "want Go syntax"},
		{"NaN", "want Go syntax"},
		{"inf", "want Go syntax"},
		{"10000000000", "too long"},
		{"3000000h", "too long (at most 2562047h"}, // overflows time.Duration: its size is the problem, not its syntax
		{"999999999h1m", "too long"},
		{"1.5.3h", "want Go syntax"},
		// Below the resolution, a value would become 0: no limit at all.
		{"0.4ns", "rounds to zero"},
		{"0.0001us", "rounds to zero"},
		{"0.0000000004", "rounds to zero"},
	}
	for _, tt := range tests {
		got, err := ParseDuration(tt.in)
		if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
			t.Errorf("ParseDuration(%q) = %v, %v; want error containing %q", tt.in, got, err, tt.wantErr)
		}
	}
}

func TestDurationString(t *testing.T) {
	tests := []struct {
		in   time.Duration
		want string
	}{
		{0, "0s"},
		{10 * time.Minute, "10m"},
		{90 * time.Second, "1m30s"},
		{time.Hour, "1h"},
		{time.Hour + time.Minute, "1h1m"},
		{time.Hour + time.Second, "1h0m1s"},
		{1500 * time.Millisecond, "1.5s"},
	}
	for _, tt := range tests {
		if got := Duration(tt.in).String(); got != tt.want {
			t.Errorf("Duration(%v).String() = %q, want %q", tt.in, got, tt.want)
		}
		if back, err := ParseDuration(tt.want); err != nil || time.Duration(back) != tt.in {
			t.Errorf("ParseDuration(%q) = %v, %v; want %v", tt.want, back, err, tt.in)
		}
	}
}

// TestDurationRoundingToZeroLocated: in a file, a duration that rounds to
// zero is an error at its line and field, in every form TOML allows,
// while 0 and the smallest non-zero durations stay valid.
func TestDurationRoundingToZeroLocated(t *testing.T) {
	_, err := Parse("pol.toml", []byte("[limits]\nwall = \"0.4ns\"\ncpu = 1e-10\n"))
	checkErrors(t, err, []string{
		`pol.toml:2: limits.wall: invalid duration "0.4ns": rounds to zero`,
		`pol.toml:3: limits.cpu: invalid duration 1e-10: rounds to zero`,
	})
	p, err := Parse("pol.toml", []byte("[limits]\nwall = \"1ns\"\ncpu = 0\n"))
	if err != nil || p.Limits.Wall != 1 || p.Limits.CPU != 0 {
		t.Errorf("wall 1ns, cpu 0: %+v, %v", p.Limits, err)
	}
}
