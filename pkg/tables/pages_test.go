package tables_test

import (
	"context"
	"slices"
	"testing"

	"github.com/minkhq/mink/pkg/objects"
	"github.com/minkhq/mink/pkg/pgschema"
	"github.com/minkhq/mink/pkg/pgtest"
	"github.com/minkhq/mink/pkg/tables"
)

// TestPages: keyset pages in byte order (uppercase before lowercase whatever the
// server's locale), each starting after the name given; committed leaves out tables
// without metadata; CurrentMetadata reads the commit pointer.
func TestPages(t *testing.T) {
	t.Parallel()
	db, _ := pgtest.DB(t)
	ctx := context.Background()
	if err := pgschema.Migrate(ctx, db); err != nil {
		t.Fatal(err)
	}
	ids := map[string]int64{}
	for _, tn := range [][2]string{{"b", "x"}, {"a", "zeta"}, {"a", "Beta"}, {"a", "alpha"}, {"a", "beta"}, {"C", "one"}} {
		tbl, err := tables.Create(ctx, db, tables.Table{Namespace: tn[0], Name: tn[1], Topic: tn[0] + "-" + tn[1], Spec: jsonSpec}, 1)
		if err != nil {
			t.Fatal(err)
		}
		ids[tn[0]+"."+tn[1]] = tbl.ID
	}
	names := func(ts []tables.Table) []string {
		var out []string
		for _, t := range ts {
			out = append(out, t.Namespace+"."+t.Name)
		}
		return out
	}
	for _, c := range []struct {
		after string
		limit int
		want  []string
	}{
		{"", 0, []string{"a.Beta", "a.alpha", "a.beta", "a.zeta"}},
		{"", 2, []string{"a.Beta", "a.alpha"}},
		{"alpha", 2, []string{"a.beta", "a.zeta"}},
		{"alphabet", 0, []string{"a.beta", "a.zeta"}},
		{"zeta", 5, nil},
	} {
		got, err := tables.ListPage(ctx, db, "a", c.after, c.limit, false)
		if err != nil || !slices.Equal(names(got), c.want) {
			t.Errorf("ListPage(a, %q, %d): %v %v, want %v", c.after, c.limit, names(got), err, c.want)
		}
	}
	if got, err := tables.ListPage(ctx, db, "a", "", 0, true); err != nil || len(got) != 0 {
		t.Errorf("committed, before any metadata: %v %v", names(got), err)
	}
	key, body, found, err := objects.CurrentMetadata(ctx, db, ids["a.beta"], true)
	if err != nil || found || key != "" || body != nil {
		t.Errorf("no metadata yet: %q %q %v %v", key, body, found, err)
	}
	if _, err := db.Exec(ctx, `INSERT INTO mink_meta_files (table_id, key, content) VALUES ($1, 'a/beta/m.json', '{}')`, ids["a.beta"]); err != nil {
		t.Fatal(err)
	}
	for _, id := range []int64{ids["a.beta"], ids["a.zeta"]} {
		if _, err := db.Exec(ctx, `INSERT INTO mink_table_meta (table_id, metadata_key, version) VALUES ($1, 'a/beta/m.json', 1)`, id); err != nil {
			t.Fatal(err)
		}
	}
	if got, err := tables.ListPage(ctx, db, "a", "", 0, true); err != nil || !slices.Equal(names(got), []string{"a.beta", "a.zeta"}) {
		t.Errorf("committed: %v %v", names(got), err)
	}
	key, body, found, err = objects.CurrentMetadata(ctx, db, ids["a.beta"], true)
	if err != nil || !found || key != "a/beta/m.json" || string(body) != "{}" {
		t.Errorf("metadata: %q %q %v %v", key, body, found, err)
	}
	if _, body, _, _ = objects.CurrentMetadata(ctx, db, ids["a.beta"], false); body != nil {
		t.Errorf("content read when not asked for")
	}
	for _, c := range []struct {
		after string
		limit int
		want  []string
	}{
		{"", 0, []string{"C", "a", "b"}}, {"", 1, []string{"C"}}, {"C", 1, []string{"a"}}, {"a", 0, []string{"b"}}, {"b", 0, nil},
	} {
		got, err := tables.NamespacesPage(ctx, db, c.after, c.limit)
		if err != nil || !slices.Equal(got, c.want) {
			t.Errorf("NamespacesPage(%q, %d): %v %v, want %v", c.after, c.limit, got, err, c.want)
		}
	}
}
