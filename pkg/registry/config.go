package registry

import (
	"errors"
	"flag"
	"fmt"
	"net/url"
	"strings"
	"time"
	"unicode"

	"github.com/minkhq/mink/pkg/flagenv"
	"github.com/minkhq/mink/pkg/tlsfiles"
)

// Flag names, for errors that name them.
const (
	flagURL      = "schema-registry-url"
	flagUsername = "schema-registry-username"
	flagPassword = "schema-registry-password"
	flagToken    = "schema-registry-bearer-token"
	flagCAFile   = "schema-registry-ca-file"
	flagTimeout  = "schema-registry-timeout"
)

// DefaultTimeout bounds each request to the registry unless told otherwise.
const DefaultTimeout = 10 * time.Second

// Config is how a Mink process reaches its Schema Registry. Every field has a flag with
// an environment twin (flagenv): --schema-registry-url and MINK_SCHEMA_REGISTRY_URL.
//
// URL user info, Password and BearerToken are secrets: String, Validate and every error
// of the Client leave them out. Embed a Config as a named field (Registry
// registry.Config), not anonymously, or its String would stand for the whole struct.
type Config struct {
	URL         string         // http(s)://[user:pass@]host:port[/path]; empty: no registry
	Username    string         // basic auth, with Password
	Password    flagenv.Secret // basic auth, with Username
	BearerToken flagenv.Secret // Authorization: Bearer; exclusive with basic auth
	CAFile      string         // PEM CA bundle trusted for an https URL instead of the system's; re-read when it changes (Client.WatchCA)
	Timeout     time.Duration  // per request; 0: DefaultTimeout
}

// RegisterFlags adds the registry flags to fs, with their defaults.
func (c *Config) RegisterFlags(fs *flag.FlagSet) {
	fs.StringVar(&c.URL, flagURL, "", "Schema Registry URL, http(s)://host:8081; may carry basic auth as https://user:pass@host:8081 (empty: no registry)")
	fs.StringVar(&c.Username, flagUsername, "", "Schema Registry basic auth user (with --"+flagPassword+")")
	fs.Var(&c.Password, flagPassword, "Schema Registry basic auth password (with --"+flagUsername+")")
	fs.Var(&c.BearerToken, flagToken, "Schema Registry bearer token, sent as Authorization: Bearer (instead of basic auth)")
	fs.StringVar(&c.CAFile, flagCAFile, "", "PEM file of the CA certificates trusted for an https Schema Registry (default: the system's); re-read every second and on SIGHUP, and a file that is not a valid bundle keeps the one in force")
	fs.DurationVar(&c.Timeout, flagTimeout, DefaultTimeout, "how long one Schema Registry request may take (0: 10s)")
}

// Validate checks every value and reports each bad one naming its flag. It never quotes
// a secret: a bad URL is shown without its user info.
func (c *Config) Validate() error {
	var errs []error
	bad := func(flagName, format string, args ...any) {
		errs = append(errs, flagenv.Errorf(flagName, format, args...))
	}
	if c.Timeout < 0 {
		bad(flagTimeout, "%v is negative (0: the default %v)", c.Timeout, DefaultTimeout)
	}
	if c.URL == "" {
		// Credentials without a URL mean a registry was meant but not named.
		for _, f := range []struct{ name, value string }{
			{flagUsername, c.Username}, {flagPassword, c.Password.Reveal()},
			{flagToken, c.BearerToken.Reveal()}, {flagCAFile, c.CAFile},
		} {
			if f.value != "" {
				bad(f.name, "is set but --%s is empty (no registry)", flagURL)
			}
		}
		return errors.Join(errs...)
	}

	u, err := parseURL(c.URL)
	if err != nil {
		bad(flagURL, "%v", err)
		return errors.Join(errs...)
	}
	urlBasic := u.User != nil
	if urlBasic {
		pass, hasPass := u.User.Password()
		if u.User.Username() == "" || !hasPass || pass == "" {
			bad(flagURL, "its user info needs a user and a password (https://user:pass@host:8081)")
		}
		if c.Username != "" || c.Password != "" {
			name := flagUsername
			if c.Username == "" {
				name = flagPassword
			}
			bad(name, "conflicts with the user info in --%s; give basic auth credentials one way", flagURL)
		}
	} else {
		if c.Username != "" && c.Password == "" {
			bad(flagPassword, "required with --%s", flagUsername)
		}
		if c.Password != "" && c.Username == "" {
			bad(flagUsername, "required with --%s", flagPassword)
		}
	}
	if c.Password != "" && hasControl(c.Password.Reveal(), false) {
		bad(flagPassword, "contains a control character (a trailing newline?)")
	}
	if c.BearerToken != "" {
		if hasControl(c.BearerToken.Reveal(), true) {
			bad(flagToken, "contains a space or control character (a trailing newline?)")
		}
		if urlBasic || c.Username != "" || c.Password != "" {
			bad(flagToken, "conflicts with basic auth (--%s/--%s or user info in --%s); use one", flagUsername, flagPassword, flagURL)
		}
	}
	if c.CAFile != "" {
		if u.Scheme != "https" {
			bad(flagCAFile, "is set but --%s %s is not https", flagURL, redactURL(u))
		}
		if _, err := tlsfiles.LoadCAs(c.CAFile); err != nil {
			bad(flagCAFile, "%v", err)
		}
	}
	return errors.Join(errs...)
}

// String describes the configuration without its secrets.
func (c Config) String() string {
	if c.URL == "" {
		return "no schema registry"
	}
	u, err := parseURL(c.URL)
	if err != nil {
		return "schema registry (bad URL)"
	}
	parts := []string{authName(u.User != nil, c.Username != "", c.BearerToken != "")}
	if c.CAFile != "" {
		parts = append(parts, "CA file "+c.CAFile)
	}
	timeout := c.Timeout
	if timeout == 0 {
		timeout = DefaultTimeout
	}
	parts = append(parts, "timeout "+timeout.String())
	return fmt.Sprintf("schema registry %s (%s)", redactURL(u), strings.Join(parts, ", "))
}

// parseURL parses a registry URL. Its errors never quote the URL, which may hold a
// password: url.Parse's own errors do.
func parseURL(raw string) (*url.URL, error) {
	u, err := url.Parse(raw)
	if err != nil {
		var ue *url.Error
		// Without an '@' there is no user info, so the cause is safe to show.
		if !strings.Contains(raw, "@") && errors.As(err, &ue) {
			return nil, fmt.Errorf("not a URL: %v", ue.Err)
		}
		return nil, errors.New("not a URL (want http://host:8081 or https://user:pass@host:8081)")
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return nil, fmt.Errorf("%s is not an http or https URL (want http://host:8081)", redactURL(u))
	}
	if u.Opaque != "" || u.Host == "" {
		return nil, fmt.Errorf("%s names no host (want %s://host:8081)", redactURL(u), u.Scheme)
	}
	// The sr client keeps a query on every request path; a registry URL has none.
	if u.RawQuery != "" || u.ForceQuery || u.Fragment != "" {
		return nil, fmt.Errorf("%s has a query or fragment; a registry URL has none", redactURL(u))
	}
	return u, nil
}

// redactURL is u for messages: without user info (a registry's user is often an API
// key), query or fragment, through flagenv.RedactURL, the one redaction of every URL
// that may hold a password.
func redactURL(u *url.URL) string {
	r := *u
	r.User = nil
	r.RawQuery, r.ForceQuery, r.Fragment, r.RawFragment = "", false, "", ""
	return flagenv.RedactURL(r.String())
}

// ShownURL is a registry URL as messages and files show it (redactURL); one that does not
// parse shows as flagenv.RedactURL leaves it.
func ShownURL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return flagenv.RedactURL(raw)
	}
	return redactURL(u)
}

// authName is how messages name the credentials in use, never their values.
func authName(urlBasic, flagBasic, token bool) string {
	switch {
	case urlBasic:
		return "basic auth from the URL's user info"
	case flagBasic:
		return "basic auth from --" + flagUsername
	case token:
		return "bearer token from --" + flagToken
	}
	return "no credentials"
}

// hasControl reports a control character (and, if space, a space) in s: never part of a
// real secret, often a newline left by the file or secret store it came from.
func hasControl(s string, space bool) bool {
	return strings.ContainsFunc(s, func(r rune) bool {
		return unicode.IsControl(r) || (space && unicode.IsSpace(r))
	})
}
