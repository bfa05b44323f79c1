package devcluster

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/sr"
	"github.com/twmb/franz-go/pkg/sr/srfake"

	"github.com/minkhq/mink/pkg/registry"
)

// RegistryFile names the file, under Config.Dir, where the embedded Schema Registry keeps
// its schemas: srfake holds them in memory only, and a record's schema id must stay valid
// from run to run.
const RegistryFile = "registry/schemas.json"

// storedSchema is one subject version as RegistryFile keeps it.
type storedSchema struct {
	sr.SubjectSchema
	Deleted bool `json:"deleted,omitempty"` // soft-deleted: still found by id
}

type registryState struct {
	Schemas []storedSchema `json:"schemas"`
}

// embeddedRegistry is srfake served on a fixed loopback port, writing every change
// through to RegistryFile before it answers, so an id a client was given is never lost.
type embeddedRegistry struct {
	reg  *srfake.Registry
	path string
	log  *slog.Logger
	srv  *http.Server
	url  string
	n    int // schemas restored at start

	mu   sync.Mutex // one change (and its save) at a time
	done chan struct{}
}

// startRegistry restores the schemas kept under dir and serves the registry on port.
func startRegistry(dir string, port int, log *slog.Logger) (*embeddedRegistry, error) {
	e := &embeddedRegistry{reg: srfake.NewRegistry(), path: filepath.Join(dir, RegistryFile), log: log, done: make(chan struct{})}
	if err := os.MkdirAll(filepath.Dir(e.path), 0o755); err != nil {
		return nil, err
	}
	n, err := e.restore()
	if err != nil {
		return nil, fmt.Errorf("restore the schemas kept in %s: %w (move the file away to start with an empty registry)", e.path, err)
	}
	e.n = n
	l, err := net.Listen("tcp", Addr(port))
	if err != nil {
		return nil, fmt.Errorf("embedded registry on port %d: %w (see --schema-registry-port)", port, err)
	}
	e.url = "http://" + l.Addr().String()
	e.srv = &http.Server{Handler: e, ReadHeaderTimeout: 10 * time.Second, ErrorLog: slog.NewLogLogger(log.Handler(), slog.LevelWarn)}
	go func() {
		defer close(e.done)
		if err := e.srv.Serve(l); !errors.Is(err, http.ErrServerClosed) {
			log.Error("schema registry: serve", "error", err)
		}
	}()
	return e, nil
}

// URL is where the registry answers.
func (e *embeddedRegistry) URL() string { return e.url }

// Close stops serving; every change is on disk already, or is when Close returns.
func (e *embeddedRegistry) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	if e.srv.Shutdown(ctx) != nil {
		// Shutdown waits 5s for connections that never sent a request (a client's
		// spare dial, say): nothing is lost by cutting them.
		e.srv.Close()
	}
	<-e.done
	e.mu.Lock() // a change being saved finishes first
	//lint:ignore SA2001 the lock is a barrier, nothing to do under it
	e.mu.Unlock()
	return nil
}

// ServeHTTP answers reads from memory; a request that may change the registry (any other
// method) is answered only once its outcome is saved.
func (e *embeddedRegistry) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method == http.MethodGet || r.Method == http.MethodHead {
		e.reg.Handler().ServeHTTP(w, r)
		return
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	rec := httptest.NewRecorder()
	e.reg.Handler().ServeHTTP(rec, r)
	if rec.Code < 300 {
		if err := e.save(); err != nil {
			e.log.Error("schema registry: save", "path", e.path, "error", err)
			w.Header().Set("Content-Type", "application/vnd.schemaregistry.v1+json")
			w.WriteHeader(http.StatusInternalServerError)
			json.NewEncoder(w).Encode(sr.ResponseError{ErrorCode: sr.ErrStoreError.Code,
				Message: fmt.Sprintf("minkdev could not save the registry to %s: %v", e.path, err)})
			return
		}
	}
	maps.Copy(w.Header(), rec.Header())
	w.WriteHeader(rec.Code)
	w.Write(rec.Body.Bytes())
}

// get asks the registry itself, in process.
func (e *embeddedRegistry) get(path string, out any) error {
	rec := httptest.NewRecorder()
	e.reg.Handler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
	if rec.Code != http.StatusOK {
		return fmt.Errorf("GET %s: %d %s", path, rec.Code, bytes.TrimSpace(rec.Body.Bytes()))
	}
	return json.Unmarshal(rec.Body.Bytes(), out)
}

// save writes every subject version, soft-deleted ones marked, to the file atomically.
func (e *embeddedRegistry) save() error {
	var all, live []sr.SubjectSchema
	if err := e.get("/schemas?deleted=true", &all); err != nil {
		return err
	}
	if err := e.get("/schemas", &live); err != nil {
		return err
	}
	type key struct {
		subject string
		version int
	}
	alive := map[key]bool{}
	for _, s := range live {
		alive[key{s.Subject, s.Version}] = true
	}
	st := registryState{Schemas: []storedSchema{}}
	for _, s := range all {
		st.Schemas = append(st.Schemas, storedSchema{SubjectSchema: s, Deleted: !alive[key{s.Subject, s.Version}]})
	}
	b, err := json.MarshalIndent(st, "", "  ")
	if err != nil {
		return err
	}
	return writeFileAtomic(e.path, append(b, '\n'))
}

// restore seeds the registry with the saved schemas, each under its id and version.
func (e *embeddedRegistry) restore() (int, error) {
	b, err := os.ReadFile(e.path)
	if errors.Is(err, os.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	var st registryState
	if err := json.Unmarshal(b, &st); err != nil {
		return 0, err
	}
	// By id: a schema's references were registered before it, so have lower ids.
	slices.SortFunc(st.Schemas, func(a, b storedSchema) int {
		return cmp.Or(cmp.Compare(a.ID, b.ID), cmp.Compare(a.Subject, b.Subject), cmp.Compare(a.Version, b.Version))
	})
	seeded := map[int]bool{}
	for _, s := range st.Schemas {
		if s.ID <= 0 || s.Version <= 0 || s.Subject == "" {
			return 0, fmt.Errorf("a schema without subject, version or id: %+v", s.SubjectSchema)
		}
		if !seeded[s.ID] {
			if err := seed(e.reg, s.SubjectSchema); err != nil {
				return 0, fmt.Errorf("subject %s version %d (id %d): %w", s.Subject, s.Version, s.ID, err)
			}
			seeded[s.ID] = true
		} else {
			// The same schema under a second subject: srfake gives it the same id, and
			// the subject's next version.
			id, v, err := e.reg.RegisterSchema(s.Subject, s.Schema)
			if err != nil {
				return 0, fmt.Errorf("subject %s version %d (id %d): %w", s.Subject, s.Version, s.ID, err)
			}
			if id != s.ID || v != s.Version {
				e.log.Warn("schema registry: a shared schema came back under another id or version",
					"subject", s.Subject, "version", s.Version, "id", s.ID, "now_version", v, "now_id", id)
			}
		}
	}
	for _, s := range st.Schemas {
		if !s.Deleted {
			continue
		}
		rec := httptest.NewRecorder()
		path := fmt.Sprintf("/subjects/%s/versions/%d", url.PathEscape(s.Subject), s.Version)
		e.reg.Handler().ServeHTTP(rec, httptest.NewRequest(http.MethodDelete, path, nil))
		if rec.Code != http.StatusOK {
			return 0, fmt.Errorf("soft-delete subject %s version %d again: %d %s", s.Subject, s.Version, rec.Code, bytes.TrimSpace(rec.Body.Bytes()))
		}
	}
	return len(st.Schemas), nil
}

// seed is SeedSchema, which panics on what it refuses.
func seed(reg *srfake.Registry, s sr.SubjectSchema) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("%v", r)
		}
	}()
	reg.SeedSchema(s.Subject, s.Version, s.ID, s.Schema)
	return nil
}

func writeFileAtomic(path string, b []byte) error {
	tmp := path + ".tmp"
	f, err := os.Create(tmp)
	if err != nil {
		return err
	}
	_, err = f.Write(b)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(tmp)
		return err
	}
	return os.Rename(tmp, path)
}

// srClient is a franz-go registry client for cfg, with its credentials, CA and timeout
// (pkg/registry's own), for the demo producer.
func srClient(cfg registry.Config) (*sr.Client, error) {
	c, err := registry.New(cfg)
	if err != nil {
		return nil, err
	}
	if c == nil {
		return nil, errors.New("no schema registry URL")
	}
	return c.SR(), nil
}
