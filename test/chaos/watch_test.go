package chaos

import (
	"context"
	"encoding/json"
	"encoding/xml"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	adminv1 "github.com/minkhq/mink/gen/mink/admin/v1"
	"github.com/minkhq/mink/pkg/apierr"
	"github.com/minkhq/mink/pkg/layout"
	"github.com/minkhq/mink/pkg/pg"
	"github.com/minkhq/mink/test/cluster"
)

// leaseWatch follows one node's own view of its leases (GetStatus, answered without
// Postgres) while a fault is injected: for every lease, the latest expiry Postgres gave
// it as the node last heard, and when the node stopped acting under it.
type leaseWatch struct {
	n     *cluster.Node
	clock func() (time.Time, error) // what "when" is measured with
	stop  chan struct{}
	done  chan struct{}

	mu        sync.Mutex
	armed     bool
	lastHeld  map[string]bool      // scopes of the last answer
	maxExp    map[string]time.Time // scope -> latest expiry the node reported
	goneAt    map[string]time.Time // scope -> first answer without it, after arm
	notActing time.Time            // first answer with acting false, after arm
	lastErr   error
}

func scopeKey(l *adminv1.Lease) string {
	return fmt.Sprintf("%s/%d/%d", strings.TrimPrefix(l.GetKind().String(), "LEASE_KIND_"), l.GetTableId(), l.GetPartition())
}

// watch polls n every 20ms until the test ends. Times are taken after each answer
// arrives, so they are upper bounds of when the node changed.
func watch(t *testing.T, n *cluster.Node, clock func() (time.Time, error)) *leaseWatch {
	w := &leaseWatch{n: n, clock: clock, stop: make(chan struct{}), done: make(chan struct{}),
		maxExp: map[string]time.Time{}, goneAt: map[string]time.Time{}}
	go func() {
		defer close(w.done)
		tick := time.NewTicker(20 * time.Millisecond)
		defer tick.Stop()
		for {
			st, err := n.Status()
			var at time.Time
			if err == nil {
				at, err = clock()
			}
			w.mu.Lock()
			if err != nil {
				w.lastErr = err
			} else {
				held := map[string]bool{}
				for _, l := range st.GetLeases() {
					k := scopeKey(l)
					held[k] = true
					if e := l.GetExpiresAt().AsTime(); e.After(w.maxExp[k]) {
						w.maxExp[k] = e
					}
				}
				w.lastHeld = held
				if w.armed {
					for k := range w.maxExp {
						if !held[k] && w.goneAt[k].IsZero() {
							w.goneAt[k] = at
						}
					}
					if !st.GetActing() && w.notActing.IsZero() {
						w.notActing = at
					}
				}
			}
			w.mu.Unlock()
			select {
			case <-w.stop:
				return
			case <-tick.C:
			}
		}
	}()
	t.Cleanup(w.halt)
	return w
}

// arm marks the fault: from now on, leases that disappear count as stopped. Leases the
// node no longer held before (released in an earlier round) are forgotten.
func (w *leaseWatch) arm() {
	w.mu.Lock()
	defer w.mu.Unlock()
	for k := range w.maxExp {
		if !w.lastHeld[k] {
			delete(w.maxExp, k)
		}
	}
	w.armed = true
}

// ready reports whether the watch has heard from the node with leases held.
func (w *leaseWatch) ready() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.lastHeld) > 0
}

func (w *leaseWatch) halt() {
	select {
	case <-w.stop:
	default:
		close(w.stop)
	}
	<-w.done
}

// stopped reports whether the node has stopped acting under every lease it had.
func (w *leaseWatch) stopped() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.notActing.IsZero() || len(w.maxExp) == 0 {
		return false
	}
	for k := range w.maxExp {
		if w.goneAt[k].IsZero() {
			return false
		}
	}
	return true
}

func (w *leaseWatch) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return fmt.Sprintf("%s: acting stopped at %v, leases %d, gone %d, last error %v", w.n.ID,
		w.notActing.Format("15:04:05.000"), len(w.maxExp), len(w.goneAt), w.lastErr)
}

// checkStoppedBeforeExpiry asserts the seed's bound: the node stopped acting under each
// lease before Postgres could let another node take it. It returns the latest expiry.
func (w *leaseWatch) checkStoppedBeforeExpiry(t *testing.T) time.Time {
	t.Helper()
	w.mu.Lock()
	defer w.mu.Unlock()
	var latest time.Time
	for k, exp := range w.maxExp {
		gone := w.goneAt[k]
		if gone.IsZero() || !gone.Before(exp) {
			t.Errorf("%s acted under %s until %v, not before it could expire at %v", w.n.ID, k, gone.Format("15:04:05.000"), exp.Format("15:04:05.000"))
		} else {
			t.Logf("%s stopped acting under %s %v before it could expire", w.n.ID, k, exp.Sub(gone).Round(time.Millisecond))
		}
		if exp.After(latest) {
			latest = exp
		}
	}
	return latest
}

// leaseSnapshot is a copy of what the watch saw.
func (w *leaseWatch) snapshot() (maxExp, goneAt map[string]time.Time, notActing time.Time) {
	w.mu.Lock()
	defer w.mu.Unlock()
	maxExp, goneAt = map[string]time.Time{}, map[string]time.Time{}
	for k, v := range w.maxExp {
		maxExp[k] = v
	}
	for k, v := range w.goneAt {
		goneAt[k] = v
	}
	return maxExp, goneAt, w.notActing
}

func localClock() (time.Time, error) { return time.Now(), nil }

func (c *chaosCluster) dbClock() (time.Time, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	return pg.Now(ctx, c.DB)
}

// ---------------------------------------------------------------------------------
// HTTP: the catalog and the S3 API

type httpResult struct {
	status int
	header http.Header
	body   []byte
}

// do sends one request; path is sent as written (not cleaned), so traversal attempts
// reach the server as a client sent them.
func do(t testing.TB, method, base, path string, header map[string]string) httpResult {
	t.Helper()
	r, err := fetch(method, base, path, header)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// fetch is do for any goroutine: it returns its error.
func fetch(method, base, path string, header map[string]string) (httpResult, error) {
	req, err := http.NewRequest(method, base+"/", nil)
	if err != nil {
		return httpResult{}, err
	}
	req.URL.Opaque = "//" + req.URL.Host + path
	for k, v := range header {
		req.Header.Set(k, v)
	}
	client := &http.Client{Timeout: 30 * time.Second}
	defer client.CloseIdleConnections()
	resp, err := client.Do(req)
	if err != nil {
		return httpResult{}, fmt.Errorf("%s %s%s: %w", method, base, path, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return httpResult{}, fmt.Errorf("%s %s%s: reading the body: %w", method, base, path, err)
	}
	return httpResult{status: resp.StatusCode, header: resp.Header, body: body}, nil
}

// icebergError parses an Iceberg REST error envelope; ok false when the body is not one.
func icebergError(body []byte) (apierr.IcebergErrorModel, bool) {
	var e apierr.IcebergErrorResponse
	if err := json.Unmarshal(body, &e); err != nil || e.Error.Code == 0 || e.Error.Type == "" || e.Error.Message == "" {
		return apierr.IcebergErrorModel{}, false
	}
	return e.Error, true
}

// s3Error parses an S3 XML error body; ok false when the body is not one.
func s3Error(body []byte) (apierr.S3Error, bool) {
	var e apierr.S3Error
	if err := xml.Unmarshal(body, &e); err != nil || e.Code == "" || e.Message == "" {
		return apierr.S3Error{}, false
	}
	return e, true
}

// warmed is a data file read once through S3 (so its owner caches it), and another one
// nobody has read.
type warmed struct {
	cached   string
	body     []byte
	uncached string
}

// dataFiles lists a table's data file keys.
func (c *chaosCluster) dataFiles(table int64) []string {
	c.T.Helper()
	rows, err := c.DB.Query(context.Background(), `SELECT key FROM mink_data_files WHERE table_id = $1 ORDER BY key`, table)
	if err != nil {
		c.T.Fatal(err)
	}
	defer rows.Close()
	var keys []string
	for rows.Next() {
		var k string
		if err := rows.Scan(&k); err != nil {
			c.T.Fatal(err)
		}
		keys = append(keys, k)
	}
	return keys
}

// warm waits for the table's first snapshot with two data files, reads one through
// file server fs, and checks that a second read is a cache hit.
func (c *chaosCluster) warm(fs *cluster.Node, table int64) warmed {
	t := c.T
	t.Helper()
	_, s3, err := fs.Endpoints()
	if err != nil {
		t.Fatal(err)
	}
	keys := waitFor(t, 30*time.Second, "two data files", func() ([]string, bool) {
		k := c.dataFiles(table)
		return k, len(k) >= 2
	})
	w := warmed{cached: keys[0], uncached: keys[len(keys)-1]}
	r := do(t, "GET", s3, "/"+layout.Bucket+"/"+w.cached, nil)
	if r.status != 200 {
		t.Fatalf("warm %s: %d %s", w.cached, r.status, r.body)
	}
	w.body = r.body
	if r := do(t, "GET", s3, "/"+layout.Bucket+"/"+w.cached, nil); r.status != 200 || r.header.Get("X-Mink-Cache") != "hit" {
		t.Fatalf("second read of %s: %d, cache %q", w.cached, r.status, r.header.Get("X-Mink-Cache"))
	}
	return w
}
