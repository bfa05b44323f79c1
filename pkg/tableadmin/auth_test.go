package tableadmin_test

import (
	"context"
	"testing"

	adminv1 "github.com/minkhq/mink/gen/mink/admin/v1"
	"github.com/minkhq/mink/pkg/apierr"
	"github.com/minkhq/mink/pkg/auth"
)

// TestReaderSeesItsTables: a reader lists only the tables its patterns match and is
// refused DescribeTable of any other, existing or not, before the table is looked up (so
// the refusal does not tell whether it exists); an admin sees everything; a request that
// carries no principal (it never passed a door) sees nothing.
func TestReaderSeesItsTables(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	jsonTable(f) // default.events
	f.kafka.CreateTopic("orders", 1, nil)
	f.create(&adminv1.CreateTableRequest{Namespace: "shop", Name: "orders", Topic: "orders", Format: adminv1.RecordFormat_RECORD_FORMAT_RAW})
	f.create(&adminv1.CreateTableRequest{Namespace: "shop", Name: "refunds", Topic: "orders", Format: adminv1.RecordFormat_RECORD_FORMAT_RAW})

	a, err := auth.New(&auth.File{ClusterSecret: "0123456789abcdef0123456789abcdef-cluster", Principals: []auth.PrincipalConfig{
		{ID: "etl", Secret: "etl-secret-0123456789", Role: auth.RoleReader, Tables: []string{"shop.ord*"}},
		{ID: "ops", Secret: "ops-secret-0123456789", Role: auth.RoleAdmin},
	}})
	if err != nil {
		t.Fatal(err)
	}
	as := func(secret string) context.Context {
		p, err := a.Bearer(secret)
		if err != nil {
			t.Fatal(err)
		}
		return auth.WithPrincipal(context.Background(), p)
	}
	etl, ops := as("etl-secret-0123456789"), as("ops-secret-0123456789")
	listed := func(ctx context.Context, ns string) []string {
		t.Helper()
		l, err := f.svc.ListTables(ctx, &adminv1.ListTablesRequest{Namespace: ns})
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, tb := range l.GetTables() {
			out = append(out, tb.GetNamespace()+"."+tb.GetName())
		}
		return out
	}
	if got := listed(etl, ""); len(got) != 1 || got[0] != "shop.orders" {
		t.Errorf("etl lists %v, want [shop.orders]", got)
	}
	if got := listed(etl, "default"); len(got) != 0 {
		t.Errorf("etl lists %v in default, want none", got)
	}
	if got := listed(ops, ""); len(got) != 3 {
		t.Errorf("ops lists %v, want all 3", got)
	}
	if got := listed(context.Background(), ""); len(got) != 0 {
		t.Errorf("no principal lists %v, want none", got)
	}

	if d, err := f.svc.DescribeTable(etl, &adminv1.DescribeTableRequest{Namespace: "shop", Name: "orders"}); err != nil || d.GetTable().GetName() != "orders" {
		t.Errorf("etl describes shop.orders: %v %v", d, err)
	}
	_, err = f.svc.DescribeTable(etl, &adminv1.DescribeTableRequest{Namespace: "shop", Name: "refunds"})
	wantErr(t, "etl describes shop.refunds", err, apierr.PermissionDenied, "", `"etl"`, "shop.refunds")
	_, err = f.svc.DescribeTable(etl, &adminv1.DescribeTableRequest{Name: "events"})
	wantErr(t, "etl describes default.events", err, apierr.PermissionDenied, "", "default.events")
	_, err = f.svc.DescribeTable(etl, &adminv1.DescribeTableRequest{Namespace: "shop", Name: "nope"})
	wantErr(t, "etl describes a table outside its patterns that does not exist", err, apierr.PermissionDenied, "", "shop.nope")
	_, err = f.svc.DescribeTable(etl, &adminv1.DescribeTableRequest{Namespace: "shop", Name: "orders_gone"})
	wantErr(t, "etl describes a missing table inside its patterns", err, apierr.NotFound, "", "shop.orders_gone")
	if _, err := f.svc.DescribeTable(ops, &adminv1.DescribeTableRequest{Namespace: "shop", Name: "refunds"}); err != nil {
		t.Errorf("ops describes shop.refunds: %v", err)
	}
	_, err = f.svc.DescribeTable(context.Background(), &adminv1.DescribeTableRequest{Name: "events"})
	wantErr(t, "no principal describes", err, apierr.PermissionDenied, "", "no principal")
}
