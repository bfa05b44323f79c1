package files

import (
	"context"
	"slices"
	"strings"
	"time"

	"github.com/minkhq/mink/pkg/apierr"
	"github.com/minkhq/mink/pkg/objects"
	"github.com/minkhq/mink/pkg/pgschema"
	"github.com/minkhq/mink/pkg/tables"
)

// List lists one page of the bucket (pkg/objects): the committed files of the tables
// readable allows (nil: every table), read from Postgres within the lookup timeout. Unlike
// a read, a listing needs Postgres: while it is unreachable a listing answers 503.
func (s *Store) List(ctx context.Context, q objects.Query, readable func(namespace, name string) bool) (objects.Listing, error) {
	ctx, cancel := context.WithTimeout(ctx, s.o.LookupTimeout)
	defer cancel()
	// A prefix that names a namespace ("<namespace>/...") needs that namespace's tables
	// only.
	ns := ""
	if before, _, ok := strings.Cut(q.Prefix, "/"); ok {
		ns = before
	}
	ts, err := tables.List(ctx, s.o.DB, ns)
	if err != nil {
		return objects.Listing{}, apierr.Postgres(err, "list the bucket's tables")
	}
	q.Tables = slices.DeleteFunc(ts, func(t tables.Table) bool { return readable != nil && !readable(t.Namespace, t.Name) })
	l, err := objects.List(ctx, s.o.DB, q)
	if err != nil {
		return objects.Listing{}, apierr.Postgres(err, "list the bucket")
	}
	return l, nil
}

// BucketCreated is the bucket's creation date: when the cluster's schema was first
// applied. It never changes, so it is read once.
func (s *Store) BucketCreated(ctx context.Context) (time.Time, error) {
	s.mu.Lock()
	t := s.created
	s.mu.Unlock()
	if !t.IsZero() {
		return t, nil
	}
	ctx, cancel := context.WithTimeout(ctx, s.o.LookupTimeout)
	defer cancel()
	t, err := pgschema.Created(ctx, s.o.DB)
	if err != nil {
		return time.Time{}, apierr.Postgres(err, "read the bucket's creation date")
	}
	t = t.UTC().Truncate(time.Second)
	s.mu.Lock()
	s.created = t
	s.mu.Unlock()
	return t, nil
}
