// Package auth is the one place Mink checks credentials. Every door calls it: the
// Iceberg REST catalog (OAuth2 client credentials, bearer tokens), the S3 API (SigV4 with
// principal keys or vended credentials), the admin gRPC API (bearer tokens), and the
// node-to-node file service (peer tokens made from the cluster secret).
//
// Design notes: docs/design/auth.md.
package auth

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"regexp"
	"strings"
	"time"
)

// Role is what a principal may do.
type Role string

const (
	// RoleReader reads the tables its patterns match: catalog loads, S3 reads, and the
	// admin API's read calls (status, nodes, leases, list and describe tables).
	RoleReader Role = "reader"
	// RoleAdmin does everything.
	RoleAdmin Role = "admin"
)

// File is the auth config file.
type File struct {
	// ClusterSecret signs tokens and vended credentials and authenticates nodes to each
	// other. At least 32 bytes.
	ClusterSecret string `json:"cluster_secret"`
	// PreviousClusterSecrets still verify (never sign): for rotation.
	PreviousClusterSecrets []string          `json:"previous_cluster_secrets,omitempty"`
	Principals             []PrincipalConfig `json:"principals"`
	// TokenTTL is how long an OAuth2 access token lasts (default 1h, 1m to 24h).
	TokenTTL Duration `json:"token_ttl,omitempty"`
	// VendedTTL is how long vended S3 credentials last (default 1h, 5m to 12h).
	VendedTTL Duration `json:"vended_ttl,omitempty"`
}

// PrincipalConfig is one principal of the file.
type PrincipalConfig struct {
	// ID is the OAuth2 client id, the S3 access key id and the name in logs.
	ID string `json:"id"`
	// Secret is the OAuth2 client secret, the S3 secret access key and a static bearer
	// token. At least 16 bytes.
	Secret string `json:"secret"`
	Role   Role   `json:"role"`
	// Tables are the reader's table patterns, "namespace.table", each part a glob
	// (path.Match: *, ?, [...]): "default.*", "*.orders". Ignored for admins.
	Tables []string `json:"tables,omitempty"`
}

// Duration is a time.Duration written as "1h" in JSON.
type Duration time.Duration

func (d *Duration) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return errors.New(`want a duration string such as "1h"`)
	}
	v, err := time.ParseDuration(s)
	if err != nil {
		return fmt.Errorf("%q is not a duration", s)
	}
	*d = Duration(v)
	return nil
}

func (d Duration) MarshalJSON() ([]byte, error) { return json.Marshal(time.Duration(d).String()) }

// Defaults and limits.
const (
	DefaultTokenTTL  = time.Hour
	DefaultVendedTTL = time.Hour
	minClusterSecret = 32
	minSecret        = 16
)

var idRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._@-]{0,127}$`)

// ParseFile reads and validates an auth config. Errors name the field at fault and never
// quote a secret.
func ParseFile(b []byte) (*File, error) {
	dec := json.NewDecoder(strings.NewReader(string(b)))
	dec.DisallowUnknownFields()
	var f File
	if err := dec.Decode(&f); err != nil {
		return nil, fmt.Errorf("auth config: %v", redactJSONError(err))
	}
	if err := f.Validate(); err != nil {
		return nil, err
	}
	return &f, nil
}

// redactJSONError keeps a decoding error's position and field, never the value it read.
func redactJSONError(err error) error {
	var se *json.SyntaxError
	var te *json.UnmarshalTypeError
	switch {
	case errors.As(err, &se):
		return fmt.Errorf("not valid JSON at byte %d", se.Offset)
	case errors.As(err, &te):
		return fmt.Errorf("field %q: want %s", te.Field, te.Type)
	case errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, io.EOF):
		return errors.New("not valid JSON: it ends early")
	}
	msg := err.Error()
	if strings.HasPrefix(msg, "json: unknown field ") {
		return errors.New("unknown field " + strings.TrimPrefix(msg, "json: unknown field "))
	}
	return errors.New("not a JSON object of the auth config's fields")
}

// Validate checks f; errors name the field.
func (f *File) Validate() error {
	bad := func(field, format string, args ...any) error {
		return fmt.Errorf("auth config: %s: %s", field, fmt.Sprintf(format, args...))
	}
	if len(f.ClusterSecret) < minClusterSecret {
		return bad("cluster_secret", "must be at least %d bytes (openssl rand -base64 32)", minClusterSecret)
	}
	for i, s := range f.PreviousClusterSecrets {
		if len(s) < minClusterSecret {
			return bad(fmt.Sprintf("previous_cluster_secrets[%d]", i), "must be at least %d bytes", minClusterSecret)
		}
	}
	if f.TokenTTL == 0 {
		f.TokenTTL = Duration(DefaultTokenTTL)
	}
	if t := time.Duration(f.TokenTTL); t < time.Minute || t > 24*time.Hour {
		return bad("token_ttl", "%v is outside 1m to 24h", t)
	}
	if f.VendedTTL == 0 {
		f.VendedTTL = Duration(DefaultVendedTTL)
	}
	if t := time.Duration(f.VendedTTL); t < 5*time.Minute || t > 12*time.Hour {
		return bad("vended_ttl", "%v is outside 5m to 12h", t)
	}
	seen := map[string]bool{}
	secrets := map[string]string{}
	for i, p := range f.Principals {
		field := fmt.Sprintf("principals[%d]", i)
		if p.ID != "" {
			field = fmt.Sprintf("principals[%d] (%q)", i, p.ID)
		}
		switch {
		case !idRE.MatchString(p.ID):
			return bad(field, "id must match %s", idRE)
		case seen[p.ID]:
			return bad(field, "id is given twice")
		case len(p.Secret) < minSecret:
			return bad(field, "secret must be at least %d bytes", minSecret)
		case p.Role != RoleReader && p.Role != RoleAdmin:
			return bad(field, "role %q is not reader or admin", string(p.Role))
		case p.Role == RoleReader && len(p.Tables) == 0:
			return bad(field, "a reader needs tables: patterns such as \"default.*\"")
		}
		if other, dup := secrets[p.Secret]; dup {
			return bad(field, "has the same secret as %q: every principal needs its own", other)
		}
		if p.Secret == f.ClusterSecret {
			return bad(field, "secret is the cluster secret")
		}
		for j, pat := range p.Tables {
			if err := checkPattern(pat); err != nil {
				return bad(fmt.Sprintf("%s.tables[%d]", field, j), "%v", err)
			}
		}
		seen[p.ID] = true
		secrets[p.Secret] = p.ID
	}
	return nil
}

func checkPattern(p string) error {
	ns, name, ok := strings.Cut(p, ".")
	if !ok || ns == "" || name == "" {
		return fmt.Errorf("%q is not namespace.table (parts may be globs: default.*)", p)
	}
	for _, part := range []string{ns, name} {
		if _, err := path.Match(part, ""); err != nil {
			return fmt.Errorf("%q: bad glob %q", p, part)
		}
	}
	return nil
}

// matches reports whether a "namespace.table" pattern matches the table.
func matches(pattern, ns, name string) bool {
	pns, pname, _ := strings.Cut(pattern, ".")
	a, _ := path.Match(pns, ns)
	b, _ := path.Match(pname, name)
	return a && b
}

// LoadFile reads and validates the auth config at p.
func LoadFile(p string) (*File, error) {
	b, err := os.ReadFile(p)
	if err != nil {
		return nil, fmt.Errorf("auth config: %w", err)
	}
	return ParseFile(b)
}
