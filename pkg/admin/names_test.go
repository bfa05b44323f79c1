package admin_test

import (
	"fmt"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	adminv1 "github.com/minkhq/mink/gen/mink/admin/v1"
	"github.com/minkhq/mink/pkg/kafkasrc"
	"github.com/minkhq/mink/pkg/kafkasrc/kafkatest"
	"github.com/minkhq/mink/pkg/lease"
	"github.com/minkhq/mink/pkg/tableadmin"
	"github.com/minkhq/mink/pkg/tablecodec"
	"github.com/minkhq/mink/pkg/tableschema"
)

// TestNamesRefusedBeforeSQL: every name field of every admin call, given a NUL byte, a
// newline or one byte too many (gRPC itself refuses strings that are not UTF-8), answers
// InvalidArgument naming the field, as a reader (read calls) or an admin would send it;
// what Postgres would have said (SQLSTATE, "invalid byte sequence") is in no answer, and
// nothing changes. So for property values Postgres cannot store, and for more declared
// columns than a table may have.
func TestNamesRefusedBeforeSQL(t *testing.T) {
	db := migrated(t)
	noLeaks(t)
	kc := kafkatest.New(t, kafkatest.Brokers(1))
	kc.CreateTopic("orders", 1, nil)
	kafka, err := kafkasrc.New(kc.Addrs())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(kafka.Close)
	svc := &tableadmin.Service{DB: db, Kafka: kafka, Codecs: tablecodec.New(db, nil)}
	a := startNodeWith(t, db, "a", lease.RoleFileServer, nodeOptions{tables: svc, auth: authConfig(t, false)})
	c := dialNode(t, a.addr)
	reader, admin := as(authReaderSecret), as(authAdminSecret)
	if _, err := c.admin.CreateTable(admin, &adminv1.CreateTableRequest{Namespace: "shop", Name: "orders", Topic: "orders",
		Format: adminv1.RecordFormat_RECORD_FORMAT_RAW}); err != nil {
		t.Fatal(err)
	}
	before := clusterState(t, db)

	type call struct {
		field string
		max   int // the field's bound in bytes
		do    func(v string) error
	}
	raw := adminv1.RecordFormat_RECORD_FORMAT_RAW
	calls := map[string]call{
		"GetStatus": {"node", 128, func(v string) error {
			_, err := c.admin.GetStatus(reader, &adminv1.GetStatusRequest{Node: v})
			return err
		}},
		"ListNodes": {"node", 128, func(v string) error {
			_, err := c.admin.ListNodes(reader, &adminv1.ListNodesRequest{Node: v})
			return err
		}},
		"ListLeases": {"node", 128, func(v string) error {
			_, err := c.admin.ListLeases(reader, &adminv1.ListLeasesRequest{Node: v})
			return err
		}},
		"DrainNode": {"node", 128, func(v string) error {
			_, err := c.admin.DrainNode(admin, &adminv1.DrainNodeRequest{Node: v})
			return err
		}},
		"UndrainNode": {"node", 128, func(v string) error {
			_, err := c.admin.UndrainNode(admin, &adminv1.UndrainNodeRequest{Node: v})
			return err
		}},
		"ListTables": {"namespace", 128, func(v string) error {
			_, err := c.admin.ListTables(reader, &adminv1.ListTablesRequest{Namespace: v})
			return err
		}},
		"ListTables node": {"node", 128, func(v string) error {
			_, err := c.admin.ListTables(reader, &adminv1.ListTablesRequest{Node: v})
			return err
		}},
		"DescribeTable namespace": {"namespace", 128, func(v string) error {
			_, err := c.admin.DescribeTable(reader, &adminv1.DescribeTableRequest{Namespace: v, Name: "orders"})
			return err
		}},
		"DescribeTable name": {"name", 128, func(v string) error {
			_, err := c.admin.DescribeTable(reader, &adminv1.DescribeTableRequest{Namespace: "shop", Name: v})
			return err
		}},
		"DropTable namespace": {"namespace", 128, func(v string) error {
			_, err := c.admin.DropTable(admin, &adminv1.DropTableRequest{Namespace: v, Name: "orders"})
			return err
		}},
		"DropTable name": {"name", 128, func(v string) error {
			_, err := c.admin.DropTable(admin, &adminv1.DropTableRequest{Namespace: "shop", Name: v})
			return err
		}},
		"AlterTable namespace": {"namespace", 128, func(v string) error {
			_, err := c.admin.AlterTable(admin, &adminv1.AlterTableRequest{Namespace: v, Name: "orders", SetProperties: map[string]string{"owner": "x"}})
			return err
		}},
		"AlterTable name": {"name", 128, func(v string) error {
			_, err := c.admin.AlterTable(admin, &adminv1.AlterTableRequest{Namespace: "shop", Name: v, SetProperties: map[string]string{"owner": "x"}})
			return err
		}},
		"CreateTable node": {"node", 128, func(v string) error {
			_, err := c.admin.CreateTable(admin, &adminv1.CreateTableRequest{Node: v, Name: "fresh", Topic: "orders", Format: raw})
			return err
		}},
		"CreateTable namespace": {"namespace", 128, func(v string) error {
			_, err := c.admin.CreateTable(admin, &adminv1.CreateTableRequest{Namespace: v, Name: "fresh", Topic: "orders", Format: raw})
			return err
		}},
		"CreateTable name": {"name", 128, func(v string) error {
			_, err := c.admin.CreateTable(admin, &adminv1.CreateTableRequest{Name: v, Topic: "orders", Format: raw})
			return err
		}},
		"CreateTable topic": {"topic", 249, func(v string) error {
			_, err := c.admin.CreateTable(admin, &adminv1.CreateTableRequest{Name: "fresh", Topic: v, Format: raw})
			return err
		}},
	}
	for name, cl := range calls {
		for what, v := range map[string]string{
			"NUL":          "orders\x00",
			"newline":      "orders\nx",
			"one too long": strings.Repeat("n", cl.max+1),
		} {
			err := cl.do(v)
			if status.Code(err) != codes.InvalidArgument || badField(err) != cl.field {
				t.Errorf("%s with a %s %s: %v (field %q), want InvalidArgument naming %s", name, what, cl.field, err, badField(err), cl.field)
			}
			leaks(t, fmt.Sprintf("%s with a %s %s", name, what, cl.field), err)
		}
	}

	// Values Postgres cannot store, and the bound on declared columns.
	for what, props := range map[string]map[string]string{
		"a NUL in a value": {"owner": "a\x00b"},
		"a NUL in a key":   {"own\x00er": "a"},
	} {
		_, err := c.admin.AlterTable(admin, &adminv1.AlterTableRequest{Namespace: "shop", Name: "orders", SetProperties: props})
		if status.Code(err) != codes.InvalidArgument || !strings.HasPrefix(badField(err), "properties[") {
			t.Errorf("AlterTable with %s: %v (field %q)", what, err, badField(err))
		}
		leaks(t, "AlterTable with "+what, err)
	}
	var cols []*adminv1.Column
	for i := range tableschema.MaxColumns + 1 {
		cols = append(cols, &adminv1.Column{Name: fmt.Sprintf("c%d", i), Type: "string"})
	}
	_, err = c.admin.CreateTable(admin, &adminv1.CreateTableRequest{Name: "wide", Topic: "orders", Format: adminv1.RecordFormat_RECORD_FORMAT_JSON, Columns: cols})
	if status.Code(err) != codes.InvalidArgument || badField(err) != "columns" {
		t.Errorf("CreateTable with %d columns: %v (field %q)", len(cols), err, badField(err))
	}
	if _, err := c.admin.CreateTable(admin, &adminv1.CreateTableRequest{Name: "wide", Topic: "orders", Format: adminv1.RecordFormat_RECORD_FORMAT_JSON,
		Columns: cols[:tableschema.MaxColumns]}); err != nil {
		t.Errorf("CreateTable with %d columns, the bound: %v", tableschema.MaxColumns, err)
	}
	_, err = c.admin.AlterTable(admin, &adminv1.AlterTableRequest{Name: "wide", Changes: []*adminv1.ColumnChange{
		{Change: &adminv1.ColumnChange_Add{Add: &adminv1.Column{Name: "one_more", Type: "string"}}}}})
	if status.Code(err) != codes.InvalidArgument || !strings.Contains(status.Convert(err).Message(), "at most 1000") {
		t.Errorf("AlterTable past %d columns: %v", tableschema.MaxColumns, err)
	}
	if _, err := c.admin.DropTable(admin, &adminv1.DropTableRequest{Name: "wide"}); err != nil {
		t.Fatal(err)
	}
	if after := clusterState(t, db); after != before {
		t.Errorf("refused calls changed the cluster:\nbefore %s\nafter  %s", before, after)
	}
}

// leaks fails t when err's message holds what a driver said.
func leaks(t *testing.T, what string, err error) {
	t.Helper()
	msg := status.Convert(err).Message()
	for _, w := range []string{"SQLSTATE", "ERROR:", "invalid byte sequence", "22021", "22P05", "unsupported Unicode"} {
		if strings.Contains(msg, w) {
			t.Errorf("%s: the answer carries the driver's words (%q): %s", what, w, msg)
		}
	}
}
