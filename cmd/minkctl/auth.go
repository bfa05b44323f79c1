package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/minkhq/mink/pkg/auth"
)

// The auth config's tools, which need no node:
//
// `minkctl auth init --out FILE` writes a new auth config (pkg/auth's format, the file
// every node reads with --auth-config): a random cluster secret and two principals, admin
// (role admin) and reader (role reader, tables default.* or --reader-tables), each with a
// random secret. It prints no secret: they are in the file, readable by its owner only.
// An existing valid FILE is kept as it is, so a one-shot (docker-compose.yaml's
// mink-auth) may run it on every start; --force writes new secrets over it. With
// --metrics-token-out TOKENFILE it also writes a random token for the nodes'
// --metrics-token-file and Prometheus's credentials_file (kept the same way; mode 0644,
// for Prometheus runs as another user: it guards metrics, not data).
//
// `minkctl auth secret [--principal ID]` prints one principal's secret from the file
// (--auth-config, MINK_AUTH_CONFIG: where a node has it), by default the first admin's:
// what a script passes on as MINK_TOKEN.

type authOpts struct {
	config       string
	out          string
	force        bool
	readerTables string
	principal    string
	metricsToken string
}

func authFlags(fs *flag.FlagSet) any {
	o := &authOpts{}
	fs.StringVar(&o.config, "auth-config", "", "the auth config file (as a node's --auth-config); auth init writes it unless --out names another")
	fs.StringVar(&o.out, "out", "", "auth init: the file to write (default --auth-config); its folder must exist")
	fs.BoolVar(&o.force, "force", false, "auth init: write new secrets over an existing file (every client then needs the new ones, and tokens signed with the old cluster secret stop verifying)")
	fs.StringVar(&o.readerTables, "reader-tables", "default.*", "auth init: the reader's table patterns, comma-separated namespace.table globs")
	fs.StringVar(&o.principal, "principal", "", "auth secret: the principal whose secret to print (default: the first admin)")
	fs.StringVar(&o.metricsToken, "metrics-token-out", "", "auth init: also write a random metrics token to this file (the nodes' --metrics-token-file), unless one is there")
	return o
}

func (c *cli) auth(_ context.Context, args []string, f any) error {
	o := f.(*authOpts)
	switch args[0] {
	case "init":
	case "secret":
		return c.authSecret(o)
	default:
		return usageError{fmt.Sprintf("auth: unknown verb %q; want init or secret", args[0])}
	}
	if o.out == "" {
		o.out = o.config
	}
	if o.out == "" {
		return usageError{"auth init: --out FILE (or --auth-config, MINK_AUTH_CONFIG) is required"}
	}
	if o.metricsToken != "" {
		if err := c.writeMetricsToken(o.metricsToken, o.force); err != nil {
			return err
		}
	}
	if !o.force {
		existing, err := auth.LoadFile(o.out)
		switch {
		case err == nil:
			fmt.Fprintf(c.stdout, "%s exists (%d principals): kept as it is (--force writes new secrets)\n", o.out, len(existing.Principals))
			return nil
		case !errors.Is(err, fs.ErrNotExist):
			return fmt.Errorf("%s exists but the nodes would refuse it: %w (fix it, or --force writes a new one)", o.out, err)
		}
	}
	var tables []string
	for _, t := range strings.Split(o.readerTables, ",") {
		if t = strings.TrimSpace(t); t != "" {
			tables = append(tables, t)
		}
	}
	file, err := auth.Generate(tables)
	if err != nil {
		return usageError{err.Error()}
	}
	if err := auth.WriteFile(o.out, file); err != nil {
		return err
	}
	fmt.Fprintf(c.stdout, "wrote %s: a new cluster secret, principals admin (role admin) and reader (role reader, tables %s); the secrets are in the file\n",
		o.out, strings.Join(tables, ", "))
	return nil
}

// authSecret prints a principal's secret, and nothing else: for $(minkctl auth secret).
func (c *cli) authSecret(o *authOpts) error {
	if o.config == "" {
		return usageError{"auth secret: --auth-config FILE (or MINK_AUTH_CONFIG) is required"}
	}
	f, err := auth.LoadFile(o.config)
	if err != nil {
		return err
	}
	for _, p := range f.Principals {
		if p.ID == o.principal || o.principal == "" && p.Role == auth.RoleAdmin {
			fmt.Fprintln(c.stdout, p.Secret)
			return nil
		}
	}
	if o.principal == "" {
		return fmt.Errorf("%s has no principal with role admin", o.config)
	}
	return fmt.Errorf("%s has no principal %q", o.config, o.principal)
}

// writeMetricsToken writes a random token to path, unless a long enough one is there
// (and not force).
func (c *cli) writeMetricsToken(path string, force bool) error {
	if b, err := os.ReadFile(path); err == nil && !force && len(strings.TrimSpace(string(b))) >= auth.MinStaticToken {
		fmt.Fprintf(c.stdout, "%s exists: kept as it is\n", path)
		return nil
	}
	tok := make([]byte, 32)
	rand.Read(tok) // never fails (crypto/rand)
	tmp, err := os.CreateTemp(filepath.Dir(path), ".metrics-token-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name()) // after the rename: nothing left to remove
	_, err = tmp.WriteString(hex.EncodeToString(tok) + "\n")
	if err == nil {
		err = tmp.Chmod(0o644)
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp.Name(), path)
	}
	if err != nil {
		return fmt.Errorf("metrics token %s: %w", path, err)
	}
	fmt.Fprintf(c.stdout, "wrote %s: a new metrics token\n", path)
	return nil
}
