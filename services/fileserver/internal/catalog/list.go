package catalog

// Lists: namespaces, tables, views, each paged as the spec has it. A list pages when the
// request carries pageToken (empty: the first page); without it everything comes at
// once, with next-page-token null. A token is a keyset position: which list it belongs
// to and the last name the page before it ended with, so a page starts where the last
// one ended whatever was created or dropped in between, and what a principal may not see
// is left out of every page without shortening the listing.

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"strconv"

	"github.com/minkhq/mink/pkg/apierr"
	"github.com/minkhq/mink/pkg/auth"
	"github.com/minkhq/mink/pkg/names"
	"github.com/minkhq/mink/pkg/tables"
)

// Page sizes; the spec lets a server answer fewer than pageSize asks for.
const (
	defaultPageSize = 100
	maxPageSize     = 1000
	maxTokenBytes   = 1024 // more than any token Mink issues (names are at most 255 bytes)
)

// Lists a token may belong to.
const (
	listNamespaces = "namespaces"
	listTables     = "tables"
	listViews      = "views"
)

// page is what a list request asks for.
type page struct {
	on    bool   // pageToken was given: one page, not everything
	after string // the page starts after this name
	size  int
}

// pageToken is what a next-page-token holds, base64url of its JSON.
type pageToken struct {
	List  string `json:"l"`
	Scope string `json:"s,omitempty"` // the namespace whose tables or views are listed
	After string `json:"a"`
}

// parsePage reads pageToken and pageSize of a list of list (within namespace scope).
func parsePage(r *http.Request, list, scope string) (page, error) {
	q := r.URL.Query()
	var pg page
	if vs, ok := q["pageSize"]; ok {
		n, err := strconv.Atoi(vs[0])
		switch {
		case len(vs) > 1:
			return page{}, apierr.Invalid("pageSize", "is given %d times; give it once", len(vs))
		case err != nil || n < 1:
			return page{}, apierr.Invalid("pageSize", "%q is not a whole number of at least 1", truncate(vs[0], 32))
		}
		pg.size = min(n, maxPageSize)
	}
	vs, ok := q["pageToken"]
	if !ok {
		return page{}, nil // everything, as the spec has it without pageToken
	}
	if len(vs) > 1 {
		return page{}, apierr.Invalid("pageToken", "is given %d times; give it once", len(vs))
	}
	pg.on = true
	if pg.size == 0 {
		pg.size = defaultPageSize
	}
	if vs[0] == "" {
		return pg, nil
	}
	var tok pageToken
	raw, err := base64.RawURLEncoding.DecodeString(vs[0])
	if err == nil && len(vs[0]) <= maxTokenBytes {
		err = json.Unmarshal(raw, &tok)
	}
	if err != nil || len(vs[0]) > maxTokenBytes || tok.List == "" {
		return page{}, apierr.Invalid("pageToken", "%q is not a token Mink issued: send the next-page-token of the page before as it came, or an empty pageToken for the first page", truncate(vs[0], 64))
	}
	if tok.List != list || tok.Scope != scope {
		return page{}, apierr.Invalid("pageToken", "was issued for another listing (%s), not for this one (%s): start again with an empty pageToken", what(tok.List, tok.Scope), what(list, scope))
	}
	pg.after = tok.After
	return pg, nil
}

func what(list, scope string) string {
	if scope == "" {
		return list
	}
	return "the " + list + " of " + scope
}

// next is the next-page-token after a page ending with last: nil (JSON null) when no
// more follow.
func next(more bool, list, scope, last string) *string {
	if !more {
		return nil
	}
	b, _ := json.Marshal(pageToken{List: list, Scope: scope, After: last})
	s := base64.RawURLEncoding.EncodeToString(b)
	return &s
}

// collect is a page of a keyset list: fetch returns up to n items after a position, in
// order (n 0: all), pos is an item's position, keep says which items the caller sees.
// It returns up to pg.size kept items (all of them when the list does not page) and
// whether more follow. Rows kept from view are skipped over in further fetches, so a
// page is full unless the list ends.
func collect[T any](pg page, fetch func(after string, n int) ([]T, error), pos func(T) string, keep func(T) (bool, error)) ([]T, bool, error) {
	var out []T
	after, batch := pg.after, 0
	if pg.on {
		batch = pg.size + 1 // one more: whether another page follows
	}
	for {
		got, err := fetch(after, batch)
		if err != nil {
			return nil, false, err
		}
		for _, it := range got {
			ok, err := keep(it)
			if err != nil {
				return nil, false, err
			}
			if !ok {
				continue
			}
			if pg.on && len(out) == pg.size {
				return out, true, nil
			}
			out = append(out, it)
		}
		if batch == 0 || len(got) < batch {
			return out, false, nil
		}
		after = pos(got[len(got)-1])
	}
}

type identifier struct {
	Namespace []string `json:"namespace"`
	Name      string   `json:"name"`
}

// The spec's ListNamespacesResponse and ListTablesResponse (of tables and of views).
type (
	namespacesPage struct {
		Next       *string    `json:"next-page-token"`
		Namespaces [][]string `json:"namespaces"`
	}
	identifiersPage struct {
		Next        *string      `json:"next-page-token"`
		Identifiers []identifier `json:"identifiers"`
	}
)

func (c *catalog) listNamespaces(w http.ResponseWriter, r *http.Request) {
	var parent string
	if raw := r.URL.Query().Get("parent"); raw != "" {
		var err error
		if parent, err = parseNamespace(raw); err != nil {
			c.fail(w, r, err, noSuchNamespace)
			return
		}
	}
	pg, err := parsePage(r, listNamespaces, "")
	if err != nil {
		c.fail(w, r, err, noSuchNamespace)
		return
	}
	p := auth.FromContext(r.Context())
	ctx, cancel := c.db(r)
	defer cancel()
	if parent != "" {
		// One level: a parent that exists has no children.
		ok, err := c.namespaceVisible(ctx, p, parent)
		if err == nil && !ok {
			err = noNamespace(parent)
		}
		if err != nil {
			c.fail(w, r, err, noSuchNamespace)
			return
		}
		c.writeJSON(w, r, namespacesPage{Namespaces: [][]string{}})
		return
	}
	nss, more, err := collect(pg,
		func(after string, n int) ([]string, error) {
			nss, err := tables.NamespacesPage(ctx, c.o.DB, after, n)
			return nss, apierr.Postgres(err, "list namespaces")
		},
		func(ns string) string { return ns },
		func(ns string) (bool, error) {
			if p.IsAdmin() {
				return true, nil // every namespace listed has a table
			}
			return c.namespaceVisible(ctx, p, ns)
		})
	if err != nil {
		c.fail(w, r, err, noSuchNamespace)
		return
	}
	out := namespacesPage{Namespaces: [][]string{}}
	for _, ns := range nss {
		out.Namespaces = append(out.Namespaces, []string{ns})
	}
	if len(nss) > 0 {
		out.Next = next(more, listNamespaces, "", nss[len(nss)-1])
	}
	c.writeJSON(w, r, out)
}

func (c *catalog) loadNamespace(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := c.db(r)
	defer cancel()
	ns, ok := c.seenNamespace(ctx, w, r)
	if !ok {
		return
	}
	if r.Method == http.MethodHead {
		w.WriteHeader(http.StatusNoContent)
		return
	}
	c.writeJSON(w, r, map[string]any{"namespace": []string{ns}, "properties": map[string]string{}})
}

// visible is nil when p sees namespace ns, else NotFound (or why it cannot tell).
func (c *catalog) visible(ctx context.Context, p *auth.Principal, ns string) error {
	ok, err := c.namespaceVisible(ctx, p, ns)
	if err == nil && !ok {
		err = noNamespace(ns)
	}
	return err
}

// seenNamespace reads {namespace} and checks that the caller sees it; when not, it has
// answered r and ok is false.
func (c *catalog) seenNamespace(ctx context.Context, w http.ResponseWriter, r *http.Request) (ns string, ok bool) {
	ns, err := namespace(r)
	if err == nil {
		err = c.visible(ctx, auth.FromContext(r.Context()), ns)
	}
	if err != nil {
		c.fail(w, r, err, noSuchNamespace)
		return "", false
	}
	return ns, true
}

// listTables lists the tables of a namespace that p may read and whose writer has
// stored their first metadata (so each listed table loads).
func (c *catalog) listTables(w http.ResponseWriter, r *http.Request) {
	ns, err := namespace(r)
	if err != nil {
		c.fail(w, r, err, noSuchNamespace)
		return
	}
	pg, err := parsePage(r, listTables, ns)
	if err != nil {
		c.fail(w, r, err, noSuchNamespace)
		return
	}
	p := auth.FromContext(r.Context())
	ctx, cancel := c.db(r)
	defer cancel()
	ts, more, err := collect(pg,
		func(after string, n int) ([]tables.Table, error) {
			ts, err := tables.ListPage(ctx, c.o.DB, ns, after, n, true)
			return ts, apierr.Postgres(err, "list the tables of %s", ns)
		},
		func(t tables.Table) string { return t.Name },
		func(t tables.Table) (bool, error) { return p.CanRead(ns, t.Name), nil })
	if err == nil && len(ts) == 0 {
		err = c.visible(ctx, p, ns) // an empty page of a namespace that exists
	}
	if err != nil {
		c.fail(w, r, err, noSuchNamespace)
		return
	}
	out := identifiersPage{Identifiers: []identifier{}}
	for _, t := range ts {
		out.Identifiers = append(out.Identifiers, identifier{Namespace: []string{ns}, Name: t.Name})
	}
	if len(ts) > 0 {
		out.Next = next(more, listTables, ns, ts[len(ts)-1].Name)
	}
	c.writeJSON(w, r, out)
}

// listViews: Mink serves no views. A namespace that exists has none; its pages are
// checked like any list's (no token was ever issued for them).
func (c *catalog) listViews(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := c.db(r)
	defer cancel()
	ns, ok := c.seenNamespace(ctx, w, r)
	if !ok {
		return
	}
	if _, err := parsePage(r, listViews, ns); err != nil {
		c.fail(w, r, err, noSuchNamespace)
		return
	}
	c.writeJSON(w, r, identifiersPage{Identifiers: []identifier{}})
}

// loadView is GET and HEAD of a view: none exists. A namespace p does not see is
// answered as missing, as for tables.
func (c *catalog) loadView(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("view")
	if err := names.Check("view", names.View, name); err != nil {
		c.fail(w, r, err, noSuchView)
		return
	}
	ctx, cancel := c.db(r)
	defer cancel()
	ns, ok := c.seenNamespace(ctx, w, r)
	if !ok {
		return
	}
	c.fail(w, r, apierr.New(apierr.NotFound, "view %s.%s does not exist: Mink serves tables, not views", ns, name), noSuchView)
}
