package tableadmin_test

import (
	"testing"

	adminv1 "github.com/minkhq/mink/gen/mink/admin/v1"
)

// TestCreateModes: a table is append unless created upsert; the mode is stored, and
// shown by CreateTable, DescribeTable and ListTables alike.
func TestCreateModes(t *testing.T) {
	f := newFixture(t)
	f.kafka.CreateTopic("users", 2, nil)
	raw := adminv1.RecordFormat_RECORD_FORMAT_RAW
	plain := f.create(&adminv1.CreateTableRequest{Name: "users_log", Topic: "users", Format: raw})
	upsert := f.create(&adminv1.CreateTableRequest{Name: "users", Format: raw, Mode: adminv1.TableMode_TABLE_MODE_UPSERT})
	if plain.GetMode() != adminv1.TableMode_TABLE_MODE_APPEND || upsert.GetMode() != adminv1.TableMode_TABLE_MODE_UPSERT {
		t.Fatalf("created modes %v and %v, want APPEND and UPSERT", plain.GetMode(), upsert.GetMode())
	}
	d, err := f.svc.DescribeTable(f.ctx, &adminv1.DescribeTableRequest{Name: "users"})
	if err != nil || d.GetTable().GetMode() != adminv1.TableMode_TABLE_MODE_UPSERT {
		t.Fatalf("described: %v %v", d.GetTable().GetMode(), err)
	}
	l, err := f.svc.ListTables(f.ctx, &adminv1.ListTablesRequest{})
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]adminv1.TableMode{}
	for _, tb := range l.GetTables() {
		got[tb.GetName()] = tb.GetMode()
	}
	if got["users"] != adminv1.TableMode_TABLE_MODE_UPSERT || got["users_log"] != adminv1.TableMode_TABLE_MODE_APPEND {
		t.Fatalf("listed modes %v", got)
	}
}
