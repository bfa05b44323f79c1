package flagenv

import (
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"regexp"
	"strings"
)

// masked stands for a password in a URL shown by RedactURL.
const masked = "xxxxx"

// RedactURL is raw fit for a message or a log line: the password of its user info and the
// values of query parameters that carry one (password, sslpassword, token, secret, ...)
// become "xxxxx"; scheme, user name, host, path and the other parameters stay, so the
// reader still sees which server is meant. A keyword/value string (host=h password=p, as
// libpq takes) has its password values masked; anything that does not parse is reduced
// to what is surely not the password.
func RedactURL(raw string) string {
	scheme, rest, isURL := strings.Cut(raw, "://")
	if !isURL {
		return kvPassword.ReplaceAllString(raw, "${1}"+masked)
	}
	u, err := url.Parse(raw)
	if err != nil {
		// Where its password ends cannot be told: keep only the scheme and what follows
		// the last '@', without a query.
		host := rest
		if i := strings.LastIndex(rest, "@"); i >= 0 {
			host = masked + "@" + rest[i+1:]
		}
		host, _, _ = strings.Cut(host, "?")
		return scheme + "://" + host
	}
	if _, has := u.User.Password(); has {
		u.User = url.UserPassword(u.User.Username(), masked)
	}
	if u.RawQuery != "" {
		q, err := url.ParseQuery(u.RawQuery)
		if err != nil {
			u.RawQuery = masked
		} else {
			for k := range q {
				if secretParam(k) {
					q[k] = []string{masked}
				}
			}
			u.RawQuery = q.Encode()
		}
	}
	// String escapes the mask's own characters nowhere: "xxxxx" needs no escaping.
	return u.String()
}

// kvPassword finds the password values of a keyword/value connection string.
var kvPassword = regexp.MustCompile(`(?i)(\b\w*(?:password|secret|token)\w*\s*=\s*)('(?:[^'\\]|\\.)*'|[^\s]*)`)

// secretParam reports a query parameter that carries a secret.
func secretParam(name string) bool {
	n := strings.ToLower(name)
	return strings.Contains(n, "password") || strings.Contains(n, "secret") || strings.Contains(n, "token")
}

// maxSecretFile bounds what ReadSecretFile reads: a secret is a line, not a volume.
const maxSecretFile = 64 << 10

// ReadSecretFile reads a secret from path (a --*-file flag's file): its content without
// the trailing newline. The file must be private to its owner (no permission for group or
// others, such as 0600 or 0400): a secret in a file every local user can read is no
// secret, so such a file is refused, naming the fix. Symbolic links are followed
// (Kubernetes mounts Secrets through them); the mode checked is the file's.
func ReadSecretFile(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return "", err
	}
	if !fi.Mode().IsRegular() {
		return "", fmt.Errorf("%s is not a regular file", path)
	}
	if perm := fi.Mode().Perm(); perm&0o077 != 0 {
		return "", fmt.Errorf("%s holds a secret but other users may access it (mode %04o); make it private to its owner: chmod 600 %s", path, perm, path)
	}
	b, err := io.ReadAll(io.LimitReader(f, maxSecretFile+1))
	if err != nil {
		return "", err
	}
	if len(b) > maxSecretFile {
		return "", fmt.Errorf("%s is larger than %d bytes: not a secret", path, maxSecretFile)
	}
	v := strings.TrimRight(string(b), "\r\n")
	if v == "" {
		return "", fmt.Errorf("%s is empty", path)
	}
	if strings.ContainsAny(v, "\r\n") {
		return "", errors.New(path + " holds more than one line")
	}
	return v, nil
}
