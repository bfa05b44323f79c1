// Package flagenv gives every command-line flag an environment twin (--lease-ttl and
// MINK_LEASE_TTL), so the same binary is configured by flags on a laptop and by env in a
// container, and it keeps errors naming the flag, and the variable when a variable set it.
package flagenv

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"strings"
)

// Prefix starts every environment twin.
const Prefix = "MINK_"

// EnvName is the environment twin of a flag: "lease-ttl" → "MINK_LEASE_TTL".
func EnvName(flagName string) string {
	return Prefix + strings.ToUpper(strings.NewReplacer("-", "_", ".", "_").Replace(flagName))
}

// Sources records which flags took their value from the environment, and from which
// variable, so later validation errors can say where a bad value came from.
type Sources map[string]string

// Parse parses args into fs, then sets every flag the command line did not give from its
// environment twin when that is set. The command line wins over the environment.
func Parse(fs *flag.FlagSet, args []string) (Sources, error) {
	return ParseEnv(fs, args, os.LookupEnv)
}

// ParseEnv is Parse with the environment read through lookup (tests use a map).
func ParseEnv(fs *flag.FlagSet, args []string, lookup func(string) (string, bool)) (Sources, error) {
	if err := fs.Parse(args); err != nil {
		return Sources{}, err
	}
	return SetFromEnv(fs, lookup)
}

// SetFromEnv sets every flag of fs not already set (by a parse) from its environment twin,
// read through lookup (os.LookupEnv in production). Use it after parsing a command line
// by hand; Parse does both.
func SetFromEnv(fs *flag.FlagSet, lookup func(string) (string, bool)) (Sources, error) {
	src := Sources{}
	given := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { given[f.Name] = true })
	var errs []error
	fs.VisitAll(func(f *flag.Flag) {
		if given[f.Name] {
			return
		}
		env := EnvName(f.Name)
		v, ok := lookup(env)
		if !ok {
			return
		}
		if err := fs.Set(f.Name, v); err != nil {
			shown := strconv.Quote(v)
			if _, secret := f.Value.(interface{ Reveal() string }); secret {
				shown = redacted
			}
			errs = append(errs, &FlagError{Flag: f.Name, Env: env, Err: fmt.Errorf("invalid value %s: %w", shown, err)})
			return
		}
		src[f.Name] = env
	})
	return src, errors.Join(errs...)
}

// FlagError is a bad value of one flag.
type FlagError struct {
	Flag string // without dashes
	Env  string // the variable that set it, if one did
	Err  error
}

func (e *FlagError) Error() string {
	if e.Env != "" {
		return fmt.Sprintf("--%s (set by %s): %v", e.Flag, e.Env, e.Err)
	}
	return fmt.Sprintf("--%s: %v", e.Flag, e.Err)
}

func (e *FlagError) Unwrap() error { return e.Err }

// Errorf is a FlagError for flag, with a message.
func Errorf(flagName, format string, args ...any) error {
	return &FlagError{Flag: flagName, Err: fmt.Errorf(format, args...)}
}

// Explain names, in every FlagError within err (joined errors included), the variable
// that set the flag, if one did.
func (s Sources) Explain(err error) error {
	if err == nil {
		return nil
	}
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		var out []error
		for _, e := range j.Unwrap() {
			out = append(out, s.Explain(e))
		}
		return errors.Join(out...)
	}
	var fe *FlagError
	if errors.As(err, &fe) && fe.Env == "" && s[fe.Flag] != "" {
		return &FlagError{Flag: fe.Flag, Env: s[fe.Flag], Err: fe.Err}
	}
	return err
}

// List is a comma-separated list flag ("a:9092,b:9092"); empty items are dropped.
type List []string

func (l *List) String() string { return strings.Join(*l, ",") }

func (l *List) Set(s string) error {
	*l = nil
	for _, item := range strings.Split(s, ",") {
		if item = strings.TrimSpace(item); item != "" {
			*l = append(*l, item)
		}
	}
	return nil
}

// Bytes is a byte-count flag: a plain number or one with a unit (KB, MB, GB, TB in
// powers of 1000; KiB, MiB, GiB, TiB in powers of 1024; "10GiB", "512MiB").
type Bytes int64

var units = []struct {
	suffix string
	n      int64
}{
	{"KiB", 1 << 10}, {"MiB", 1 << 20}, {"GiB", 1 << 30}, {"TiB", 1 << 40},
	{"KB", 1e3}, {"MB", 1e6}, {"GB", 1e9}, {"TB", 1e12}, {"B", 1},
}

func (b *Bytes) String() string {
	n := int64(*b)
	for _, u := range units[:4] {
		if n != 0 && n%u.n == 0 && n/u.n < 1024 {
			return strconv.FormatInt(n/u.n, 10) + u.suffix
		}
	}
	return strconv.FormatInt(n, 10)
}

func (b *Bytes) Set(s string) error {
	s = strings.TrimSpace(s)
	mult := int64(1)
	for _, u := range units {
		if strings.HasSuffix(s, u.suffix) {
			s, mult = strings.TrimSpace(strings.TrimSuffix(s, u.suffix)), u.n
			break
		}
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n < 0 {
		return errors.New("want a non-negative byte count such as 10GiB, 512MiB or 1000000")
	}
	if n > 0 && mult > 1 && n > (1<<63-1)/mult {
		return errors.New("byte count overflows")
	}
	*b = Bytes(n * mult)
	return nil
}

// Secret is a string flag whose value never prints: String (so %v, %s and %q, flag
// defaults, and a Config printed whole), slog and JSON show "<redacted>" when it is set
// and "" when not. Reveal is the one way to the value, for the code that sends it.
type Secret string

const redacted = "<redacted>"

func (s Secret) String() string {
	if s == "" {
		return ""
	}
	return redacted
}

// GoString keeps %#v from printing the value.
func (s Secret) GoString() string { return s.String() }

// LogValue keeps slog from printing the value.
func (s Secret) LogValue() slog.Value { return slog.StringValue(s.String()) }

// MarshalJSON keeps encoding/json from printing the value.
func (s Secret) MarshalJSON() ([]byte, error) { return json.Marshal(s.String()) }

// Set takes any value: a secret is never refused, so never quoted in an error.
func (s *Secret) Set(v string) error { *s = Secret(v); return nil }

// Reveal is the secret's value.
func (s Secret) Reveal() string { return string(s) }
