package tableadmin_test

import (
	"context"
	"fmt"
	"slices"
	"testing"

	adminv1 "github.com/minkhq/mink/gen/mink/admin/v1"
	"github.com/minkhq/mink/pkg/apierr"
	"github.com/minkhq/mink/pkg/auth"
)

// TestListTablesPages: pages of ListTables follow one another by namespace then name,
// each table once; a reader's pages are full of its own tables whatever lies between;
// a token that is not one is InvalidArgument; with_summary fills each table's summary.
func TestListTablesPages(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.kafka.CreateTopic("t", 2, nil)
	var want []string
	for i := range 7 {
		for _, ns := range []string{"a", "b"} {
			name := fmt.Sprintf("t%d", i)
			f.create(&adminv1.CreateTableRequest{Namespace: ns, Name: name, Topic: "t", Format: adminv1.RecordFormat_RECORD_FORMAT_RAW})
			want = append(want, ns+"."+name)
		}
	}
	slices.Sort(want)
	pages := func(ctx context.Context, size int32, summary bool) (got []string, n int) {
		t.Helper()
		tok := ""
		for {
			resp, err := f.svc.ListTables(ctx, &adminv1.ListTablesRequest{PageSize: size, PageToken: tok, WithSummary: summary})
			if err != nil {
				t.Fatal(err)
			}
			n++
			for _, tb := range resp.GetTables() {
				got = append(got, tb.GetNamespace()+"."+tb.GetName())
				if summary && (tb.GetSummary() == nil || tb.GetSummary().GetUnheldPartitions() != 2) {
					t.Errorf("%s: summary %v, want 2 unheld partitions", tb.GetName(), tb.GetSummary())
				}
				if !summary && tb.GetSummary() != nil {
					t.Errorf("%s: a summary nobody asked for", tb.GetName())
				}
			}
			if tok = resp.GetNextPageToken(); tok == "" {
				return got, n
			}
			if len(resp.GetTables()) != int(size) {
				t.Fatalf("a page of %d before the last, want %d", len(resp.GetTables()), size)
			}
		}
	}
	if got, n := pages(f.ctx, 4, true); !slices.Equal(got, want) || n != 4 {
		t.Errorf("pages of 4: %v in %d pages, want %v", got, n, want)
	}
	if got, n := pages(f.ctx, 0, false); !slices.Equal(got, want) || n != 1 {
		t.Errorf("every table: %v in %d pages", got, n)
	}
	a, err := auth.New(&auth.File{ClusterSecret: "0123456789abcdef0123456789abcdef-cluster", Principals: []auth.PrincipalConfig{
		{ID: "etl", Secret: "etl-secret-0123456789", Role: auth.RoleReader, Tables: []string{"b.*"}}}})
	if err != nil {
		t.Fatal(err)
	}
	p, err := a.Bearer("etl-secret-0123456789")
	if err != nil {
		t.Fatal(err)
	}
	var wantB []string
	for _, w := range want {
		if w[0] == 'b' {
			wantB = append(wantB, w)
		}
	}
	if got, _ := pages(auth.WithPrincipal(context.Background(), p), 3, false); !slices.Equal(got, wantB) {
		t.Errorf("reader's pages: %v, want %v", got, wantB)
	}
	_, err = f.svc.ListTables(f.ctx, &adminv1.ListTablesRequest{PageSize: 2, PageToken: "not-a-token!"})
	wantErr(t, "bad token", err, apierr.InvalidArgument, "page_token")
	_, err = f.svc.ListTables(f.ctx, &adminv1.ListTablesRequest{PageSize: -1})
	wantErr(t, "negative size", err, apierr.InvalidArgument, "page_size")
}

// TestDescribeSchemaVersions: DescribeTable lists every schema version with the columns
// it added, and each partition's lag in time beside its lag in records.
func TestDescribeSchemaVersions(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	jsonTable(f)
	f.alter(&adminv1.AlterTableRequest{Name: "events", Changes: []*adminv1.ColumnChange{add("note", "string", "")}})
	f.alter(&adminv1.AlterTableRequest{Name: "events", Changes: []*adminv1.ColumnChange{widen("id", "long")}})
	d := f.describe("events")
	vs := d.GetSchemaVersions()
	if len(vs) != 3 || vs[0].GetVersion() != 0 || vs[1].GetVersion() != 1 || vs[2].GetVersion() != 2 {
		t.Fatalf("versions: %v", vs)
	}
	if len(vs[0].GetAdded()) != 0 || len(vs[1].GetAdded()) != 1 || vs[1].GetAdded()[0].GetName() != "note" ||
		vs[1].GetAdded()[0].GetType() != "string" || len(vs[2].GetAdded()) != 0 {
		t.Errorf("added columns: %v", vs)
	}
	for _, p := range d.GetPartitions() {
		if p.GetLagRecords() < 0 && p.GetLag() != nil {
			t.Errorf("partition %d: a lag in time without one in records: %v", p.GetPartition(), p)
		}
	}
	if d.GetCommittedAt() != nil || len(d.GetSnapshots()) != 0 {
		t.Errorf("a table no writer committed: committed_at %v, snapshots %v", d.GetCommittedAt(), d.GetSnapshots())
	}
}
