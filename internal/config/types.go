package config

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/orchestrator-dev/orchestrator/internal/yamlfile"
)

// Duration is a time.Duration written with a unit in YAML: "15s", "2h",
// "1h30m", or in whole days first: "90d", "1d12h". A bare 0 is accepted;
// other bare numbers are not, since their unit would be a guess.
type Duration time.Duration

// Std returns d as a time.Duration.
func (d Duration) Std() time.Duration { return time.Duration(d) }

// String formats d like time.Duration.
func (d Duration) String() string { return time.Duration(d).String() }

// UnmarshalYAML implements yaml.Unmarshaler.
func (d *Duration) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind != yaml.ScalarNode {
		return errors.New(`want a duration such as "30s" or "2h"`)
	}
	v, err := ParseDuration(n.Value)
	if err != nil {
		return err
	}
	*d = v
	return nil
}

// MarshalYAML implements yaml.Marshaler.
func (d Duration) MarshalYAML() (any, error) { return d.String(), nil }

// ParseDuration parses s as a Duration.
func ParseDuration(s string) (Duration, error) {
	s = strings.TrimSpace(s)
	if s == "0" {
		return 0, nil
	}
	if _, err := strconv.ParseFloat(s, 64); err == nil {
		return 0, fmt.Errorf("duration %q has no unit (write %ss or %sm)", s, s, s)
	}
	bad := fmt.Errorf(`invalid duration %q: want a number with a unit, such as "30s", "2h" or "90d"`, s)
	// Whole days first ("90d", "1d12h"): time.ParseDuration has no day.
	rest, sign, days := s, time.Duration(1), int64(0)
	if i := strings.IndexByte(s, 'd'); i >= 0 {
		n := strings.TrimPrefix(s[:i], "-")
		if n != s[:i] {
			sign = -1
		}
		v, err := strconv.ParseInt(n, 10, 64)
		if err != nil || n == "" || n[0] == '+' || v > int64(math.MaxInt64/(24*time.Hour)) {
			return 0, bad
		}
		days, rest = v, s[i+1:]
		if rest == "" {
			return Duration(sign * time.Duration(days) * 24 * time.Hour), nil
		}
		if rest[0] == '-' || rest[0] == '+' {
			return 0, bad
		}
	}
	v, err := time.ParseDuration(rest)
	if err != nil {
		return 0, bad
	}
	return Duration(sign * (time.Duration(days)*24*time.Hour + v)), nil
}

// ByteSize is a size in bytes, written in YAML as a number of bytes or with
// a unit: "512KiB", "64MiB", "1GiB", "100kB", "10MB" (spaces allowed).
type ByteSize int64

// Int returns b as an int, saturating at the largest int.
func (b ByteSize) Int() int {
	if int64(b) > int64(math.MaxInt) {
		return math.MaxInt
	}
	return int(b)
}

// String formats b with the largest binary unit that divides it.
func (b ByteSize) String() string {
	for _, u := range []struct {
		name string
		size int64
	}{{"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10}} {
		if b != 0 && int64(b)%u.size == 0 {
			return strconv.FormatInt(int64(b)/u.size, 10) + u.name
		}
	}
	return strconv.FormatInt(int64(b), 10)
}

// UnmarshalYAML implements yaml.Unmarshaler.
func (b *ByteSize) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind != yaml.ScalarNode {
		return errors.New(`want a size such as 8192 or "64MiB"`)
	}
	v, err := ParseByteSize(n.Value)
	if err != nil {
		return err
	}
	*b = v
	return nil
}

// MarshalYAML implements yaml.Marshaler.
func (b ByteSize) MarshalYAML() (any, error) { return b.String(), nil }

var byteUnits = map[string]int64{
	"": 1, "b": 1,
	"k": 1 << 10, "kib": 1 << 10, "kb": 1000,
	"m": 1 << 20, "mib": 1 << 20, "mb": 1000 * 1000,
	"g": 1 << 30, "gib": 1 << 30, "gb": 1000 * 1000 * 1000,
}

// ParseByteSize parses s as a ByteSize.
func ParseByteSize(s string) (ByteSize, error) {
	t := strings.TrimSpace(s)
	i := 0
	for i < len(t) && t[i] >= '0' && t[i] <= '9' {
		i++
	}
	if i == 0 {
		return 0, fmt.Errorf(`invalid size %q: want a number of bytes or a size such as "64MiB"`, s)
	}
	n, err := strconv.ParseInt(t[:i], 10, 64)
	unit, ok := byteUnits[strings.ToLower(strings.TrimSpace(t[i:]))]
	if err != nil || !ok {
		return 0, fmt.Errorf(`invalid size %q: want a number of bytes or a size such as "64MiB"`, s)
	}
	if n > math.MaxInt64/unit {
		return 0, fmt.Errorf("size %q is too large", s)
	}
	return ByteSize(n * unit), nil
}

// Error is one problem in a configuration, located as precisely as known:
// the same type as a spec's problems (yamlfile.Error).
type Error = yamlfile.Error

// Errors returns the problems in err, an error returned by Parse, Load or
// Validate, one per element (err itself when it is not a joined error).
func Errors(err error) []error {
	if err == nil {
		return nil
	}
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		return j.Unwrap()
	}
	return []error{err}
}
