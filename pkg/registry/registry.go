// Package registry is Mink's Schema Registry client: it fetches the schemas Kafka
// records were written with, from any Confluent-compatible registry, with every
// reference resolved into a schemafmt.Source that a format compiles with no registry at
// hand.
//
// Design notes: docs/design/registry.md.
package registry

import (
	"context"
	"crypto/tls"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	lru "github.com/hashicorp/golang-lru/v2"
	"github.com/twmb/franz-go/pkg/sr"

	"github.com/minkhq/mink/pkg/apierr"
	"github.com/minkhq/mink/pkg/flagenv"
	"github.com/minkhq/mink/pkg/flight"
	"github.com/minkhq/mink/pkg/schemafmt"
	"github.com/minkhq/mink/pkg/tlsfiles"
)

// Type is a schema's format, as the registry names it.
type Type string

const (
	Avro     Type = "AVRO"
	Protobuf Type = "PROTOBUF"
	JSON     Type = "JSON"
)

func typeOf(t sr.SchemaType) Type {
	switch t {
	case sr.TypeProtobuf:
		return Protobuf
	case sr.TypeJSON:
		return JSON
	}
	return Avro // the registry's default: an empty schemaType is Avro
}

// Schema is one registry schema with its references resolved. Callers must not modify
// its Source: the Client's cache shares it.
type Schema struct {
	ID      int
	Subject string // "" when fetched by id, which names no subject
	Version int    // 0 when fetched by id
	Type    Type
	Source  schemafmt.Source
}

const (
	// cacheSize bounds each cache (by id, by subject and version): far more schemas than
	// a cluster's topics use. The two caches share each schema's text.
	cacheSize = 4096
	// maxDepth bounds how deeply references nest; real schemas nest a few levels.
	maxDepth = 32
)

// Client fetches schemas from one registry. It is safe for concurrent use. A nil
// *Client is "no registry configured": its fetches return ErrNotConfigured.
type Client struct {
	sr     *sr.Client
	http   *http.Client
	url    string             // redacted
	auth   string             // how messages name the credentials
	caFile bool               // --schema-registry-ca-file given, for hints
	cas    *tlsfiles.CABundle // --schema-registry-ca-file; nil without it

	ids      *lru.Cache[int, Schema]
	versions *lru.Cache[subjectVersion, Schema]
	flights  *flight.Group[any]
}

type subjectVersion struct {
	subject string
	version int
}

// Option is an option of New.
type Option func(*options)

type options struct{ log *slog.Logger }

// WithLogger is where the Client logs the reloads of its CA file (default: nowhere).
func WithLogger(log *slog.Logger) Option { return func(o *options) { o.log = log } }

// New returns a client of the registry cfg names, or (nil, nil) when cfg.URL is empty:
// no registry configured. It validates cfg (see Config.Validate) and does not contact
// the registry.
func New(cfg Config, with ...Option) (*Client, error) {
	var o options
	for _, opt := range with {
		opt(&o)
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.URL == "" {
		return nil, nil
	}
	u, err := parseURL(cfg.URL)
	if err != nil {
		return nil, err // Validate saw it already
	}
	opts := []sr.ClientOpt{sr.UserAgent("mink")}
	switch {
	case u.User != nil:
		pass, _ := u.User.Password()
		opts = append(opts, sr.BasicAuth(u.User.Username(), pass))
	case cfg.Username != "":
		opts = append(opts, sr.BasicAuth(cfg.Username, cfg.Password.Reveal()))
	case cfg.BearerToken != "":
		opts = append(opts, sr.BearerToken(cfg.BearerToken.Reveal()))
	}
	auth := authName(u.User != nil, cfg.Username != "", cfg.BearerToken != "")
	// Credentials travel only in headers: the sr client quotes its request URLs in its
	// errors, so a base URL with user info would put them there.
	base := *u
	base.User = nil

	tr := http.DefaultTransport.(*http.Transport).Clone()
	var rt http.RoundTripper = tr
	var cas *tlsfiles.CABundle
	if cfg.CAFile != "" {
		if cas, err = tlsfiles.LoadCABundle(cfg.CAFile, o.log); err != nil {
			return nil, flagenv.Errorf(flagCAFile, "%v", err)
		}
		tr.TLSClientConfig = &tls.Config{MinVersion: tls.VersionTLS12}
		rt = cas.Transport(tr) // new connections verify against the bundle in force
	}
	timeout := cfg.Timeout
	if timeout == 0 {
		timeout = DefaultTimeout
	}
	hc := &http.Client{Transport: rt, Timeout: timeout}
	opts = append(opts, sr.URLs(base.String()), sr.HTTPClient(hc))
	cl, err := sr.NewClient(opts...)
	if err != nil {
		return nil, apierr.Wrap(apierr.Internal, err, "schema registry %s", redactURL(u))
	}
	ids, _ := lru.New[int, Schema](cacheSize)
	versions, _ := lru.New[subjectVersion, Schema](cacheSize)
	return &Client{sr: cl, http: hc, url: redactURL(u), auth: auth, caFile: cfg.CAFile != "", cas: cas, ids: ids, versions: versions,
		flights: flight.New[any](context.Background())}, nil
}

// WatchCA re-reads --schema-registry-ca-file every interval and on SIGHUP until ctx
// ends, as a node does its --tls-client-ca-file: connections made after a new bundle is
// in force verify against it, and a file that is not a valid bundle keeps the one in
// force. It returns at once without a CA file (or a registry).
func (c *Client) WatchCA(ctx context.Context, interval time.Duration) {
	if c == nil || c.cas == nil {
		return
	}
	c.cas.Watch(ctx, interval)
}

// SR is the franz-go registry client underneath, configured with the credentials, CA
// and timeout: for tools that also write to the registry (the demo producers of make dev).
func (c *Client) SR() *sr.Client { return c.sr }

// URL is the registry's URL without credentials, for messages.
func (c *Client) URL() string {
	if c == nil {
		return ""
	}
	return c.url
}

// String names the registry without credentials.
func (c *Client) String() string {
	if c == nil {
		return "no schema registry"
	}
	return "schema registry " + c.url
}

// Close releases idle connections. The Client stays usable; a nil Client is fine.
func (c *Client) Close() {
	if c != nil {
		c.http.CloseIdleConnections()
	}
}

// ByID is the schema with global id id, references resolved. Subject and Version are
// unset: an id may be registered under many subjects.
func (c *Client) ByID(ctx context.Context, id int) (Schema, error) {
	if c == nil {
		return Schema{}, ErrNotConfigured
	}
	if s, ok := c.ids.Get(id); ok {
		return s, nil
	}
	t := target{id: id}
	if id < 0 {
		return Schema{}, c.notFound(t, "", "")
	}
	v, err := c.shared(ctx, "id/"+strconv.Itoa(id), func(ctx context.Context) (any, error) {
		return c.sr.SchemaByID(ctx, id)
	})
	if err != nil {
		return Schema{}, c.fail(ctx, err, t, "")
	}
	raw := v.(sr.Schema)
	refs, err := c.resolve(ctx, raw.References, t.String(), nil)
	if err != nil {
		return Schema{}, err
	}
	s := Schema{ID: id, Type: typeOf(raw.Type), Source: schemafmt.Source{Text: raw.Schema, References: refs}}
	c.ids.Add(id, s)
	return s, nil
}

// ByVersion is version version of subject, references resolved.
func (c *Client) ByVersion(ctx context.Context, subject string, version int) (Schema, error) {
	if c == nil {
		return Schema{}, ErrNotConfigured
	}
	if version < 1 { // -1 would mean latest to the registry
		return Schema{}, c.notFound(target{subject: subject, version: version}, "", "")
	}
	return c.subjectVersion(ctx, subject, version, "", nil)
}

// Latest is subject's latest version, references resolved. It always asks the
// registry; callers decide how fresh they need it.
func (c *Client) Latest(ctx context.Context, subject string) (Schema, error) {
	if c == nil {
		return Schema{}, ErrNotConfigured
	}
	return c.subjectVersion(ctx, subject, latest, "", nil)
}

// latest is the version the sr client asks for as "latest".
const latest = -1

// subjectVersion fetches version (or latest) of subject and resolves its references.
// where says, for a reference, what referred to it; path holds the (subject, version)s
// being resolved around this one, outermost first.
func (c *Client) subjectVersion(ctx context.Context, subject string, version int, where string, path []subjectVersion) (Schema, error) {
	t := target{subject: subject, version: version}
	if subject == "" {
		return Schema{}, c.notFound(t, `subject ""`, where)
	}
	if version != latest {
		if s, ok := c.versions.Get(subjectVersion{subject, version}); ok {
			return s, nil
		}
	}
	var raw sr.SubjectSchema
	var err error
	if version == latest {
		// Not shared: a caller joining a fetch begun before its call could miss a
		// version registered in between.
		raw, err = c.sr.SchemaByVersion(ctx, subject, latest)
	} else {
		var v any
		v, err = c.shared(ctx, "version/"+strconv.Itoa(version)+"/"+subject, func(ctx context.Context) (any, error) {
			// A soft-deleted version still decodes what was written with it, and must
			// resolve as it did when the cache took it.
			return c.sr.SchemaByVersion(sr.WithParams(ctx, sr.ShowDeleted), subject, version)
		})
		if err == nil {
			raw = v.(sr.SubjectSchema)
		}
	}
	if err != nil {
		return Schema{}, c.fail(ctx, err, t, where)
	}
	if version != latest || raw.Version < 1 {
		raw.Version = version // what was asked is what the registry answered
	}
	if raw.Version < 1 {
		return Schema{}, apierr.New(apierr.Internal, "schema registry %s answered %s%s with no version", c.url, t, where)
	}
	k := subjectVersion{subject, raw.Version}
	if slices.Contains(path, k) {
		return Schema{}, apierr.New(apierr.Internal, "schema registry %s holds a reference cycle: %s", c.url, chain(append(path, k)))
	}
	path = append(path[:len(path):len(path)], k)
	if len(path) > maxDepth {
		return Schema{}, apierr.New(apierr.Internal, "schema registry %s holds references nested deeper than %d: %s", c.url, maxDepth, chain(path))
	}
	refs, err := c.resolve(ctx, raw.References, target{subject: subject, version: raw.Version}.String(), path)
	if err != nil {
		return Schema{}, err
	}
	s := Schema{ID: raw.ID, Subject: subject, Version: raw.Version, Type: typeOf(raw.Type),
		Source: schemafmt.Source{Text: raw.Schema.Schema, References: refs}}
	c.versions.Add(k, s)
	if raw.ID > 0 {
		// The same schema by id, as ByID would give it: ids name no subject.
		c.ids.ContainsOrAdd(raw.ID, Schema{ID: raw.ID, Type: s.Type, Source: s.Source})
	}
	return s, nil
}

// resolve fetches every reference (recursively), in the registry's order. by names the
// referring schema for messages.
func (c *Client) resolve(ctx context.Context, refs []sr.SchemaReference, by string, path []subjectVersion) ([]schemafmt.Reference, error) {
	if len(refs) == 0 {
		return nil, nil
	}
	out := make([]schemafmt.Reference, 0, len(refs))
	for _, r := range refs {
		where := fmt.Sprintf(" (referenced as %q by %s)", r.Name, by)
		if r.Version < 1 && r.Version != latest {
			return nil, apierr.New(apierr.Internal, "schema registry %s gave %s a reference %q to version %d of subject %q, which is no version",
				c.url, by, r.Name, r.Version, r.Subject)
		}
		// A version of -1 is Confluent's "latest": it resolves to whatever is latest now.
		s, err := c.subjectVersion(ctx, r.Subject, r.Version, where, path)
		if err != nil {
			return nil, err
		}
		out = append(out, schemafmt.Reference{Name: r.Name, Subject: r.Subject, Version: s.Version, Source: s.Source})
	}
	return out, nil
}

// shared runs fetch once for all concurrent callers of one key. fetch makes one request
// and waits on nothing else shared, so flights cannot wait on each other. It runs
// detached from any one caller's cancellation (the HTTP timeout bounds it), so one
// caller giving up does not fail the others; each caller still stops waiting when its
// own ctx ends.
func (c *Client) shared(ctx context.Context, key string, fetch func(context.Context) (any, error)) (any, error) {
	if err := ctx.Err(); err != nil {
		return nil, err // start no request for a caller who has gone
	}
	v, _, err := c.flights.Do(ctx, key, func(b *flight.Build) (any, error) {
		if !b.Begin() {
			return nil, context.Canceled // every caller gave up at once
		}
		return fetch(context.WithoutCancel(ctx))
	})
	return v, err
}

// target is what a request asked for, for messages.
type target struct {
	id      int
	subject string // "": by id
	version int    // latest: the latest version
}

func (t target) String() string {
	switch {
	case t.subject == "" && t.version == 0:
		return "schema id " + strconv.Itoa(t.id)
	case t.version == latest:
		return fmt.Sprintf("the latest version of subject %q", t.subject)
	}
	return fmt.Sprintf("version %d of subject %q", t.version, t.subject)
}

// chain shows a reference path, its middle elided when long: subject "a" version 1 →
// subject "b" version 2.
func chain(path []subjectVersion) string {
	var parts []string
	for i, k := range path {
		if len(path) > 6 && i >= 2 && i < len(path)-3 {
			if i == 2 {
				parts = append(parts, "…")
			}
			continue
		}
		parts = append(parts, fmt.Sprintf("subject %q version %d", k.subject, k.version))
	}
	return strings.Join(parts, " → ")
}
