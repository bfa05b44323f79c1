// Package nodetest helps the tests of a node's configuration, the node's own flags and
// each role's.
package nodetest

import (
	"flag"
	"io"
	"strings"
	"testing"

	"github.com/minkhq/mink/pkg/lease"
	"github.com/minkhq/mink/pkg/node"
)

// Parse builds the config of a node of role with its role's flags rc (nil: none) from a
// command line and an environment, as the role's main does.
func Parse(role lease.Role, rc node.RoleConfig, args []string, env map[string]string) (node.Config, error) {
	cfg := node.Config{Role: role, RoleConfig: rc}
	fs := flag.NewFlagSet("test", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	_, err := cfg.Parse(fs, args, func(k string) (string, bool) { v, ok := env[k]; return v, ok })
	return cfg, err
}

// Refused fails t unless err is an error that mentions every one of want: the flag,
// the variable that set it, the bad value.
func Refused(t testing.TB, err error, want ...string) {
	t.Helper()
	if err == nil {
		t.Fatal("no error")
	}
	for _, w := range want {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("error %q does not mention %q", err, w)
		}
	}
}

// Required are the flags every node needs, with values that pass.
var Required = []string{"--postgres-url", "postgres://u@127.0.0.1:5432/db", "--kafka-brokers", "k1:9092,k2:9092"}

// Case is a command line and an environment that a config refuses, and what the error
// must mention.
type Case struct {
	Name string
	Args []string
	Env  map[string]string
	Want []string
}

// RefusedAll runs each case as a subtest: parse must refuse it (Refused).
func RefusedAll(t *testing.T, parse func(args []string, env map[string]string) error, cases []Case) {
	t.Helper()
	for _, c := range cases {
		t.Run(c.Name, func(t *testing.T) { Refused(t, parse(c.Args, c.Env), c.Want...) })
	}
}
