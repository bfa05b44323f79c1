package tableadmin_test

import (
	"strings"
	"testing"

	adminv1 "github.com/minkhq/mink/gen/mink/admin/v1"
	"github.com/minkhq/mink/pkg/apierr"
)

// TestTopics: a user without a topic makes one through the admin API (the node's own
// brokers), lists it with the tables made of it, and a table can then be created over
// it; a bad name, count or a topic that exists is refused naming the field.
func TestTopics(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	resp, err := f.svc.CreateTopic(f.ctx, &adminv1.CreateTopicRequest{Name: "clicks", Partitions: 3})
	if err != nil {
		t.Fatalf("CreateTopic clicks: %v", err)
	}
	if got := resp.GetTopic(); got.GetName() != "clicks" || got.GetPartitions() != 3 || len(got.GetTables()) != 0 {
		t.Errorf("CreateTopic clicks answered %v, want 3 partitions and no table", got)
	}
	// The brokers' default partition count (kfake's: 10 unless told otherwise).
	if resp, err = f.svc.CreateTopic(f.ctx, &adminv1.CreateTopicRequest{Name: "views"}); err != nil || resp.GetTopic().GetPartitions() < 1 {
		t.Errorf("CreateTopic views with the default partitions: %v, %v", resp, err)
	}
	tbl := f.create(&adminv1.CreateTableRequest{Name: "clicks", Format: jsonFormat, Columns: []*adminv1.Column{{Name: "user", Type: "string"}}})
	if tbl.GetPartitions() != 3 {
		t.Errorf("the table over clicks has %d partitions, want the topic's 3", tbl.GetPartitions())
	}

	l, err := f.svc.ListTopics(f.ctx, &adminv1.ListTopicsRequest{})
	if err != nil {
		t.Fatalf("ListTopics: %v", err)
	}
	var got []string
	for _, tp := range l.GetTopics() {
		got = append(got, tp.GetName()+"/"+strings.Join(tp.GetTables(), ","))
		if tp.GetName() == "clicks" && tp.GetPartitions() != 3 {
			t.Errorf("ListTopics: clicks has %d partitions, want 3", tp.GetPartitions())
		}
	}
	if strings.Join(got, " ") != "clicks/default.clicks views/" {
		t.Errorf("ListTopics: %v, want clicks (with default.clicks) and views, sorted", got)
	}

	_, err = f.svc.CreateTopic(f.ctx, &adminv1.CreateTopicRequest{Name: "clicks", Partitions: 1})
	wantErr(t, "a topic that exists", err, apierr.AlreadyExists, "", `"clicks"`, "exists")
	for _, tc := range []struct {
		name  string
		req   *adminv1.CreateTopicRequest
		field string
		want  string
	}{
		{"no name", &adminv1.CreateTopicRequest{Partitions: 1}, "name", "empty"},
		{"a space", &adminv1.CreateTopicRequest{Name: "my topic"}, "name", "' '"},
		{"a slash", &adminv1.CreateTopicRequest{Name: "a/b"}, "name", "a-z, A-Z, 0-9"},
		{"dot", &adminv1.CreateTopicRequest{Name: ".."}, "name", `".."`},
		{"too long", &adminv1.CreateTopicRequest{Name: strings.Repeat("t", 250)}, "name", "249"},
		{"negative partitions", &adminv1.CreateTopicRequest{Name: "p", Partitions: -2}, "partitions", "-2"},
		{"too many partitions", &adminv1.CreateTopicRequest{Name: "p", Partitions: 1_000_000}, "partitions", "10000"},
		{"negative replication", &adminv1.CreateTopicRequest{Name: "p", ReplicationFactor: -1}, "replication_factor", "-1"},
		// One broker: Kafka itself refuses three replicas, and says which field.
		{"more replicas than brokers", &adminv1.CreateTopicRequest{Name: "p", Partitions: 1, ReplicationFactor: 3}, "replication_factor", `"p"`},
	} {
		_, err := f.svc.CreateTopic(f.ctx, tc.req)
		wantErr(t, tc.name, err, apierr.InvalidArgument, tc.field, tc.want)
	}
	if l, err := f.svc.ListTopics(f.ctx, &adminv1.ListTopicsRequest{}); err != nil || len(l.GetTopics()) != 2 {
		t.Errorf("topics after only bad requests: %v %v; want clicks and views only", l, err)
	}
}
