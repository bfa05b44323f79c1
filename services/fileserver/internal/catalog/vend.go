package catalog

// Vended credentials: with auth on, a table load asking for them
// (X-Iceberg-Access-Delegation: vended-credentials, which iceberg-go and PyIceberg send
// by default, Trino with iceberg.rest-catalog.vended-credentials-enabled, Spark with
// header.X-Iceberg-Access-Delegation) gets S3 credentials scoped to the table's prefix
// and expiring (pkg/auth's Vend), in the spec's storage-credentials and, for clients
// that read only the config, in the load's config. GET .../credentials (the spec's
// loadCredentials) hands out fresh ones: iceberg-go calls it before the expiry that
// s3.session-token-expires-at-ms says, Java's VendedCredentialsProvider at
// client.refresh-credentials-endpoint.

import (
	"encoding/json"
	"io"
	"maps"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/minkhq/mink/pkg/apierr"
	"github.com/minkhq/mink/pkg/auth"
	"github.com/minkhq/mink/pkg/layout"
)

// FileIO config keys of S3 credentials, as iceberg-go, PyIceberg and Java read them.
const (
	keyAccessKeyID       = "s3.access-key-id"
	keySecretAccessKey   = "s3.secret-access-key"
	keySessionToken      = "s3.session-token"
	keyTokenExpiresAtMs  = "s3.session-token-expires-at-ms"
	keyRefreshCredsURI   = "client.refresh-credentials-endpoint"
	headerAccessDelegate = "vended-credentials"

	headerAccessDelegation = "X-Iceberg-Access-Delegation"
)

// StorageCredential is the spec's StorageCredential.
type StorageCredential struct {
	Prefix string            `json:"prefix"`
	Config map[string]string `json:"config"`
}

// wantsVended reports whether r asks for vended credentials (a comma-separated list of
// access mechanisms).
func wantsVended(r *http.Request) bool {
	for _, v := range r.Header.Values(headerAccessDelegation) {
		for m := range strings.SplitSeq(v, ",") {
			if strings.EqualFold(strings.TrimSpace(m), headerAccessDelegate) {
				return true
			}
		}
	}
	return false
}

// credentials are fresh vended credentials for p to read ns.name, as a storage
// credential whose config also names the S3 endpoint.
func (c *catalog) credentials(p *auth.Principal, ns, name string) (StorageCredential, error) {
	cr, err := c.o.Auth.Vend(p, ns, name)
	if err != nil {
		return StorageCredential{}, err
	}
	cfg := maps.Clone(c.fileIOMap)
	if cfg == nil {
		cfg = map[string]string{}
	}
	cfg[keyAccessKeyID] = cr.AccessKeyID
	cfg[keySecretAccessKey] = cr.SecretAccessKey
	cfg[keySessionToken] = cr.SessionToken
	cfg[keyTokenExpiresAtMs] = strconv.FormatInt(cr.Expires.UnixMilli(), 10)
	return StorageCredential{Prefix: layout.URI(layout.TablePrefix(ns, name)), Config: cfg}, nil
}

// vend is a load's config and storage-credentials (JSON) with credentials for p.
func (c *catalog) vend(p *auth.Principal, ns, name string) (config, storageCreds []byte, err error) {
	sc, err := c.credentials(p, ns, name)
	if err != nil {
		return nil, nil, err
	}
	cfg := maps.Clone(sc.Config)
	cfg[keyRefreshCredsURI] = "v1/namespaces/" + url.PathEscape(ns) + "/tables/" + url.PathEscape(name) + "/credentials"
	if config, err = json.Marshal(cfg); err != nil {
		return nil, nil, err
	}
	if storageCreds, err = json.Marshal([]StorageCredential{sc}); err != nil {
		return nil, nil, err
	}
	return config, storageCreds, nil
}

// loadCredentials is GET .../tables/{table}/credentials: fresh credentials for a table
// the caller may load. With auth off there are none to vend: the list is empty (any
// keys read).
func (c *catalog) loadCredentials(w http.ResponseWriter, r *http.Request) {
	ns, name, err := tablePath(r)
	if err != nil {
		c.fail(w, r, err, noSuchNamespace)
		return
	}
	p := auth.FromContext(r.Context())
	ctx, cancel := c.db(r)
	defer cancel()
	if _, err := c.load(ctx, p, ns, name, false); err != nil {
		c.fail(w, r, err, tableNotFound(err))
		return
	}
	creds := []StorageCredential{}
	if c.o.Auth != nil {
		sc, err := c.credentials(p, ns, name)
		if err != nil {
			c.fail(w, r, err, noSuchTable)
			return
		}
		creds = append(creds, sc)
		w.Header().Set("Cache-Control", "no-store")
	}
	c.writeJSON(w, r, map[string]any{"storage-credentials": creds})
}

// metrics is POST .../tables/{table}/metrics: engines report scans after reading; the
// reports are read (within the door's bound) and dropped.
func (c *catalog) metrics(w http.ResponseWriter, r *http.Request) {
	if c.o.Auth != nil {
		ns, name, err := tablePath(r)
		if err != nil {
			c.fail(w, r, err, noSuchNamespace)
			return
		}
		if p := auth.FromContext(r.Context()); !p.CanRead(ns, name) {
			c.fail(w, r, apierr.New(apierr.PermissionDenied, "principal %q may not read table %s.%s, nor report on it", p.ID, ns, name), noSuchTable)
			return
		}
	}
	if _, err := io.Copy(io.Discard, r.Body); err != nil {
		if isTooLarge(err) {
			c.tooLarge(w, r, MaxBodyBytes)
			return
		}
		c.fail(w, r, apierr.Wrap(apierr.InvalidArgument, err, "reading the metrics report"), noSuchTable)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}
