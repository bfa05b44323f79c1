package catalog

// Server-side scan planning (package plan) behind the catalog's door: a plan is
// authorized as a load (403 for a table the caller may not read), is made over what a
// load names (the live tail included), and fails in the catalog's envelope.

import (
	"context"
	"net/http"

	"github.com/minkhq/mink/pkg/auth"
	"github.com/minkhq/mink/pkg/tables"
	"github.com/minkhq/mink/services/fileserver/internal/live"
	"github.com/minkhq/mink/services/fileserver/internal/plan"
)

// planCatalog is the catalog as package plan uses it.
type planCatalog struct{ c *catalog }

var _ plan.Catalog = planCatalog{}

func (pc planCatalog) Table(r *http.Request, m plan.Metadata) (plan.Loaded, error) {
	c := pc.c
	ns, name, err := tablePath(r)
	if err != nil {
		return plan.Loaded{}, &namespaceMissing{err}
	}
	ctx, cancel := c.db(r)
	defer cancel()
	cur, err := c.load(ctx, auth.FromContext(r.Context()), ns, name, m != plan.NoMetadata)
	if err != nil {
		return plan.Loaded{}, err
	}
	out := plan.Loaded{Table: cur.table, Key: cur.key, Content: cur.content}
	if m == plan.Live && c.o.Live != nil {
		lctx, lcancel := context.WithTimeout(r.Context(), c.o.LiveTimeout)
		defer lcancel()
		res, err := c.o.Live.Load(lctx, cur.table, live.Base{Key: cur.key, Content: cur.content})
		if err != nil {
			return plan.Loaded{}, err
		}
		out.Key, out.Content = res.Key, res.Content
	}
	return out, nil
}

func (pc planCatalog) Credentials(r *http.Request, t tables.Table) ([]plan.StorageCredential, error) {
	if pc.c.o.Auth == nil || !wantsVended(r) {
		return nil, nil
	}
	sc, err := pc.c.credentials(auth.FromContext(r.Context()), t.Namespace, t.Name)
	if err != nil {
		return nil, err
	}
	return []plan.StorageCredential{{Prefix: sc.Prefix, Config: sc.Config}}, nil
}

func (pc planCatalog) Fail(w http.ResponseWriter, r *http.Request, err error, notFound string) {
	if notFound == "" {
		notFound = tableNotFound(err)
	}
	pc.c.fail(w, r, err, notFound)
}

func (pc planCatalog) TooLarge(w http.ResponseWriter, r *http.Request) {
	pc.c.tooLarge(w, r, MaxBodyBytes)
}
