package catalog

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/minkhq/mink/pkg/apierr"
	"github.com/minkhq/mink/pkg/auth"
	"github.com/minkhq/mink/pkg/icebergmeta"
	"github.com/minkhq/mink/pkg/layout"
	"github.com/minkhq/mink/pkg/objects"
	"github.com/minkhq/mink/pkg/tables"
	"github.com/minkhq/mink/services/fileserver/internal/live"
)

// current is a table's committed metadata.
type current struct {
	table   tables.Table
	key     string
	content []byte
}

// load returns the current metadata of namespace.name for p (without its content for
// HEAD). NotFound names what is missing: the namespace, the table, or its first commit;
// a table p may not read is PermissionDenied, in a namespace p sees (else the
// namespace is missing).
func (c *catalog) load(ctx context.Context, p *auth.Principal, ns, name string, content bool) (current, error) {
	if !p.CanRead(ns, name) {
		ok, err := c.namespaceVisible(ctx, p, ns)
		switch {
		case err != nil:
			return current{}, err
		case !ok:
			return current{}, &namespaceMissing{noNamespace(ns)}
		}
		return current{}, apierr.New(apierr.PermissionDenied, "principal %q may not read table %s.%s: it is not among its tables (%s)",
			p.ID, ns, name, strings.Join(p.Tables, ", "))
	}
	t, err := tables.Get(ctx, c.o.DB, ns, name)
	if apierr.Classify(err) == apierr.NotFound {
		ok, nsErr := c.namespaceVisible(ctx, p, ns)
		switch {
		case nsErr != nil:
			return current{}, nsErr
		case !ok:
			return current{}, &namespaceMissing{noNamespace(ns)}
		}
		return current{}, apierr.New(apierr.NotFound, "table %s.%s does not exist", ns, name)
	}
	if err != nil {
		return current{}, apierr.Postgres(err, "load table %s.%s", ns, name)
	}
	if t.TopicLost != "" {
		// Its topic was deleted and created again: the rows it holds are no longer in
		// Kafka, and serving them as the table's would be serving what is not there.
		return current{}, tables.TopicLostError(t, t.TopicLost)
	}
	cur := current{table: t}
	var found bool
	cur.key, cur.content, found, err = objects.CurrentMetadata(ctx, c.o.DB, t.ID, content)
	switch {
	case err != nil:
		return current{}, apierr.Postgres(err, "load table %s", t.FullName())
	case !found:
		return current{}, apierr.New(apierr.NotFound,
			"table %s has no committed snapshot yet, nor metadata: its writer stores the first as soon as it holds the table's writer lease, and commits within %s (table property %s) of its first indexed range",
			t.FullName(), t.Props().CommitInterval, tables.PropCommitInterval)
	case content && cur.content == nil:
		return current{}, fmt.Errorf("table %s: its current metadata file %s is missing", t.FullName(), cur.key)
	}
	return cur, nil
}

// namespaceMissing marks a load's 404 as the namespace's rather than the table's.
type namespaceMissing struct{ error }

func (e *namespaceMissing) Unwrap() error { return e.error }

// tableNotFound is the exception type of a load's 404: the namespace's or the table's.
func tableNotFound(err error) string {
	var nm *namespaceMissing
	if errors.As(err, &nm) {
		return noSuchNamespace
	}
	return noSuchTable
}

// tablePath reads {namespace} and {table}.
func tablePath(r *http.Request) (ns, name string, err error) {
	if ns, err = namespace(r); err != nil {
		return "", "", err
	}
	name, err = tableName(r)
	return ns, name, err
}

// tableExists is HEAD of a table: 204 when a load would answer, from Postgres alone
// (never Kafka), with no body either way.
func (c *catalog) tableExists(w http.ResponseWriter, r *http.Request) {
	ns, name, err := tablePath(r)
	if err != nil {
		c.fail(w, r, err, noSuchNamespace)
		return
	}
	ctx, cancel := c.db(r)
	defer cancel()
	if _, err := c.load(ctx, auth.FromContext(r.Context()), ns, name, false); err != nil {
		c.fail(w, r, err, tableNotFound(err))
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// snapshotsMode reads loadTable's snapshots parameter: all (the default) or refs.
func snapshotsMode(r *http.Request) (refsOnly bool, err error) {
	vs := r.URL.Query()["snapshots"]
	switch {
	case len(vs) == 0:
		return false, nil
	case len(vs) > 1:
		return false, apierr.Invalid("snapshots", "is given %d times; give it once: all or refs", len(vs))
	case strings.EqualFold(vs[0], "all"):
		return false, nil
	case strings.EqualFold(vs[0], "refs"):
		return true, nil
	}
	return false, apierr.Invalid("snapshots", "%q is neither all (every snapshot, the default) nor refs (the snapshots branches and tags reference)", truncate(vs[0], 64))
}

func (c *catalog) loadTable(w http.ResponseWriter, r *http.Request) {
	ns, name, err := tablePath(r)
	if err != nil {
		c.fail(w, r, err, noSuchNamespace)
		return
	}
	refsOnly, err := snapshotsMode(r)
	if err != nil {
		c.fail(w, r, err, noSuchTable)
		return
	}
	p := auth.FromContext(r.Context())
	ctx, cancel := c.db(r)
	defer cancel()
	cur, err := c.load(ctx, p, ns, name, true)
	if err != nil {
		c.fail(w, r, err, tableNotFound(err))
		return
	}
	// Credentials first: a principal refused them needs no live load.
	config, creds := c.fileIO, []byte(nil)
	if c.o.Auth != nil {
		w.Header().Set("Vary", "Authorization, "+headerAccessDelegation)
		if wantsVended(r) {
			config, creds, err = c.vend(p, ns, name)
			if err != nil {
				c.fail(w, r, err, noSuchTable)
				return
			}
			w.Header().Set("Cache-Control", "no-store")
		}
	}
	if c.o.Live != nil {
		lctx, lcancel := context.WithTimeout(r.Context(), c.o.LiveTimeout)
		res, err := c.o.Live.Load(lctx, cur.table, live.Base{Key: cur.key, Content: cur.content})
		lcancel()
		if err != nil {
			c.fail(w, r, err, noSuchTable)
			return
		}
		cur.key, cur.content = res.Key, res.Content
	}
	metadata := cur.content
	if refsOnly {
		if metadata, err = c.refsOnly(cur.key, cur.content); err != nil {
			c.fail(w, r, fmt.Errorf("table %s: %w", cur.table.FullName(), err), "")
			return
		}
	}
	body, err := c.loadTableResult(cur.key, metadata, config, creds)
	if err != nil {
		c.fail(w, r, fmt.Errorf("table %s: %w", cur.table.FullName(), err), "")
		return
	}
	// A hash of the whole answer: it changes whenever any of it does, and no two
	// answers share one (answers with fresh vended credentials never match: a client
	// must not keep credentials past their expiry on the strength of a 304).
	sum := sha256.Sum256(body)
	etag := `"` + hex.EncodeToString(sum[:16]) + `"`
	w.Header().Set("ETag", etag)
	if noneMatch(r.Header.Values("If-None-Match"), etag) {
		w.WriteHeader(http.StatusNotModified)
		return
	}
	writeBody(w, r, body)
}

// noneMatch reports whether If-None-Match values match etag: "*", or a list naming it
// (weak comparison, as RFC 9110 has it for If-None-Match).
func noneMatch(values []string, etag string) bool {
	for _, v := range values {
		for t := range strings.SplitSeq(v, ",") {
			t = strings.TrimSpace(t)
			if t == "*" || strings.TrimPrefix(t, "W/") == etag {
				return true
			}
		}
	}
	return false
}

// refsOnly is the snapshots=refs form of the metadata file key: computed once per file,
// as files never change once named.
func (c *catalog) refsOnly(key string, content []byte) ([]byte, error) {
	if b, ok := c.refs.Get(key); ok {
		return b, nil
	}
	b, err := icebergmeta.RefsOnly(content)
	if err != nil {
		return nil, fmt.Errorf("metadata file %s: %w", key, err)
	}
	c.refs.Add(key, b)
	return b, nil
}

// loadTableResult is the JSON of a LoadTableResult: the metadata file's bytes as they
// are stored, in an envelope, without decoding or re-encoding them (encoding/json would
// validate and compact all of them, for every load, as a json.RawMessage). The files
// are written by Mink's own encoder (pkg/icebergmeta), as one JSON object. config is the
// config object's JSON; storageCreds, when not nil, the storage-credentials array's.
func (c *catalog) loadTableResult(key string, metadata, config, storageCreds []byte) ([]byte, error) {
	if m := bytes.TrimSpace(metadata); len(m) < 2 || m[0] != '{' || m[len(m)-1] != '}' {
		return nil, fmt.Errorf("its metadata file %s is not a JSON object", key)
	}
	loc, err := json.Marshal(layout.URI(key))
	if err != nil {
		return nil, err
	}
	const (
		head  = `{"metadata-location":`
		mid   = `,"metadata":`
		tail  = `,"config":`
		creds = `,"storage-credentials":`
	)
	b := make([]byte, 0, len(head)+len(loc)+len(mid)+len(metadata)+len(tail)+len(config)+len(creds)+len(storageCreds)+1)
	b = append(append(append(append(b, head...), loc...), mid...), metadata...)
	b = append(append(b, tail...), config...)
	if storageCreds != nil {
		b = append(append(b, creds...), storageCreds...)
	}
	return append(b, '}'), nil
}
