package console

import (
	"context"
	"crypto/tls"
	"errors"
	"net/http"
	"sort"
	"strconv"
	"strings"

	"github.com/apache/iceberg-go/catalog"
	"github.com/apache/iceberg-go/catalog/rest"
	"github.com/apache/iceberg-go/table"
	"google.golang.org/protobuf/proto"

	adminv1 "github.com/minkhq/mink/gen/mink/admin/v1"
	"github.com/minkhq/mink/pkg/apierr"
	"github.com/minkhq/mink/pkg/names"
	"github.com/minkhq/mink/pkg/tablerows"
)

// Rows a page asks for: DefaultRows unless it says, at most MaxRows.
const (
	DefaultRows = 50
	MaxRows     = 500
)

type column struct {
	Name string `json:"name"`
	Type string `json:"type"`
}

type rowsAnswer struct {
	Table    string   `json:"table"`
	Catalog  string   `json:"catalog"`
	Snapshot *int64   `json:"snapshot"` // the snapshot the load answered; nil before the first commit
	Columns  []column `json:"columns"`
	// Rows are cells as minkctl scan prints them (tablerows.Text), null for null.
	Rows [][]*string `json:"rows"`
}

// rows reads the newest (or oldest, from=start) rows of a table as an engine does: a
// table load from a file server's catalog (its live tail included) with the session's
// token, its files read over S3, the cells rendered by tablerows as minkctl scan's.
func (c *Console) rows(w http.ResponseWriter, r *http.Request, s *sess) {
	q := r.URL.Query()
	ns, name, ok := strings.Cut(q.Get("table"), ".")
	if !ok {
		ns, name = "default", q.Get("table")
	}
	if err := errors.Join(names.Check("namespace", names.Namespace, ns), names.Check("table", names.Table, name)); err != nil || name == "" {
		writeError(w, apierr.Invalid("table", "want namespace.table"))
		return
	}
	limit := DefaultRows
	if l := q.Get("limit"); l != "" {
		n, err := strconv.Atoi(l)
		if err != nil || n < 1 || n > MaxRows {
			writeError(w, apierr.Invalid("limit", "want 1 to %d rows", MaxRows))
			return
		}
		limit = n
	}
	from := q.Get("from")
	if from != "" && from != "start" && from != "end" {
		writeError(w, apierr.Invalid("from", "want start (the oldest rows) or end (the newest)"))
		return
	}
	// The admin API decides first whether the principal may read the table at all.
	if _, err := c.invoke(r.Context(), s, "DescribeTable", func(m proto.Message) error {
		m.(*adminv1.DescribeTableRequest).Namespace, m.(*adminv1.DescribeTableRequest).Name = ns, name
		return nil
	}); err != nil {
		writeError(w, err)
		return
	}
	url, err := c.catalogURL(r.Context(), s)
	if err != nil {
		writeError(w, err)
		return
	}
	var tlsCfg *tls.Config
	if c.o.CatalogTLS != nil {
		tlsCfg = c.o.CatalogTLS()
	}
	ctx, opts := tablerows.CatalogOptions(r.Context(), s.token, tlsCfg)
	cat, err := rest.NewCatalog(ctx, "mink", url, opts...)
	if err != nil {
		writeError(w, c.readError(url, err))
		return
	}
	tbl, err := cat.LoadTable(ctx, table.Identifier{ns, name})
	if err != nil {
		writeError(w, c.readError(url, err))
		return
	}
	ans := rowsAnswer{Table: ns + "." + name, Catalog: url, Rows: [][]*string{}}
	if snap := tbl.CurrentSnapshot(); snap != nil {
		ans.Snapshot = &snap.SnapshotID
	}
	var cols []string
	for _, f := range tbl.Schema().Fields() {
		cols = append(cols, f.Name)
		ans.Columns = append(ans.Columns, column{Name: f.Name, Type: f.Type.String()})
	}
	_, err = tablerows.Read(ctx, tbl, cols, int64(limit), from != "start", func(vals []any) error {
		row := make([]*string, len(vals))
		for i, v := range vals {
			if v != nil {
				t := tablerows.Text(v)
				row[i] = &t
			}
		}
		ans.Rows = append(ans.Rows, row)
		return nil
	})
	if err != nil {
		writeError(w, c.readError(url, err))
		return
	}
	writeJSON(w, http.StatusOK, ans)
}

// readError is what the page is told of a failed read through the catalog: the
// catalog's own answer (an Iceberg error names its type and message), never a local
// error's text, which goes to the log.
func (c *Console) readError(url string, err error) error {
	switch {
	case errors.Is(err, catalog.ErrNoSuchTable), errors.Is(err, catalog.ErrNoSuchNamespace):
		return apierr.New(apierr.NotFound, "the catalog at %s has no such table (is it committed yet?)", url)
	case errors.Is(err, rest.ErrUnauthorized):
		return apierr.New(apierr.Unauthenticated, "the catalog at %s refused the session's token: sign in again", url)
	case errors.Is(err, rest.ErrForbidden):
		return apierr.New(apierr.PermissionDenied, "the catalog at %s refused to load the table for this principal", url)
	case errors.Is(err, rest.ErrServiceUnavailable):
		return apierr.New(apierr.Unavailable, "the catalog at %s is unavailable now: try again", url)
	}
	id := apierr.RequestID()
	c.log.Warn("console: reading rows failed", "catalog", url, "request_id", id, "error", err)
	return apierr.New(apierr.Unavailable, "reading the rows through the catalog at %s failed (request id %s: the node's log says why)", url, id)
}

// catalogURL is a file server's catalog: this node's when it is one, else the first
// live, undrained file server's, by node id.
func (c *Console) catalogURL(ctx context.Context, s *sess) (string, error) {
	m, err := c.invoke(ctx, s, "ListNodes", func(proto.Message) error { return nil })
	if err != nil {
		return "", err
	}
	nodes := m.(*adminv1.ListNodesResponse).GetNodes()
	sort.Slice(nodes, func(i, j int) bool {
		if a, b := nodes[i].GetNodeId() == c.o.NodeID, nodes[j].GetNodeId() == c.o.NodeID; a != b {
			return a
		}
		return nodes[i].GetNodeId() < nodes[j].GetNodeId()
	})
	for _, n := range nodes {
		if a := n.GetAddrs()["catalog"]; a != "" && !n.GetDraining() {
			if c.o.CatalogTLS != nil {
				return "https://" + a, nil
			}
			return "http://" + a, nil
		}
	}
	return "", apierr.New(apierr.Unavailable, "no file server is live, so there is no catalog to read the rows through")
}
