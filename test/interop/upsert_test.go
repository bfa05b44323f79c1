package interop

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	adminv1 "github.com/minkhq/mink/gen/mink/admin/v1"
	"github.com/minkhq/mink/pkg/icebergmeta"
	"github.com/minkhq/mink/pkg/kafkasrc/kafkatest"
	"github.com/minkhq/mink/test/cluster"
)

// The upsert table: the latest value per key of a keyed topic, read through its
// position delete files.
const (
	upsertTable      = "keyed"
	upsertTopic      = "keyed"
	upsertPartitions = 2
)

// createUpsert creates default.keyed, an upsert table over the raw records of
// upsertTopic. Live loads are off so that the snapshot a reader loads is the committed
// one waitUpsert saw with delete files.
func createUpsert(t *testing.T, c *cluster.Cluster, fs *cluster.Node) {
	t.Helper()
	c.Kafka.CreateTopic(upsertTopic, upsertPartitions, nil)
	props := map[string]string{"mink.range.max-age": "300ms", "mink.commit.interval": "500ms", "mink.live-load": "false"}
	if _, err := fs.Admin().CreateTable(context.Background(), &adminv1.CreateTableRequest{Namespace: "default", Name: upsertTable,
		Topic: upsertTopic, Format: adminv1.RecordFormat_RECORD_FORMAT_RAW, Mode: adminv1.TableMode_TABLE_MODE_UPSERT,
		Properties: props}); err != nil {
		t.Fatalf("create default.%s: %v", upsertTable, err)
	}
}

// upsertKey is a key of an upsert table: keys are per partition.
type upsertKey struct {
	p   int32
	key string // base64, as read.mjs reports it
}

// upsertLive is what a live key must read as: its last record.
type upsertLive struct {
	o     int64
	value string // base64
}

// produceUpsert writes rounds of updates and tombstones over a few keys, each round
// committed before the next, so that later ranges supersede rows of earlier files (their
// position deletes) and tombstone keys earlier files hold. It returns the table Kafka
// says the snapshot must be: per key its last record, tombstoned keys removed.
func produceUpsert(t *testing.T, c *cluster.Cluster, catalogURL string) map[upsertKey]upsertLive {
	t.Helper()
	cl := c.Kafka.Client(kgo.RecordPartitioner(kgo.ManualPartitioner()))
	defer cl.Close()
	rng := rand.New(rand.NewPCG(19, 19))
	want := map[upsertKey]upsertLive{}
	ends := map[int32]int64{}
	const rounds, perRound, keys = 3, 60, 20
	for round := range rounds {
		recs := make([]*kgo.Record, 0, perRound)
		for i := range perRound {
			r := &kgo.Record{Topic: upsertTopic, Partition: int32(rng.IntN(upsertPartitions)),
				Key: fmt.Appendf(nil, "user-%d", rng.IntN(keys)), Value: fmt.Appendf(nil, "v%d.%d ✓", round, i)}
			if rng.IntN(6) == 0 {
				r.Value = nil // a tombstone
			}
			recs = append(recs, r)
		}
		for _, r := range kafkatest.Produce(t, cl, recs...) {
			k := upsertKey{r.Partition, base64.StdEncoding.EncodeToString(r.Key)}
			if r.Value == nil {
				delete(want, k)
			} else {
				want[k] = upsertLive{r.Offset, base64.StdEncoding.EncodeToString(r.Value)}
			}
			ends[r.Partition] = max(ends[r.Partition], r.Offset+1)
		}
		waitUpsert(t, catalogURL, c.Auth, ends, round == rounds-1)
	}
	return want
}

// waitUpsert waits until the upsert table's current snapshot covers ends and, with
// deletes, has position delete files.
func waitUpsert(t *testing.T, catalogURL string, a *cluster.Auth, ends map[int32]int64, deletes bool) {
	t.Helper()
	cluster.WaitFor(t, 60*time.Second, fmt.Sprintf("default.%s to be committed up to %v", upsertTable, ends), func() (string, bool) {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		tbl, err := loadTable(ctx, catalogURL, a, "default", upsertTable)
		if err != nil {
			return err.Error(), false
		}
		snap := tbl.CurrentSnapshot()
		if snap == nil {
			return "no snapshot", false
		}
		cov, err := icebergmeta.ParseCoverage(snap.Summary)
		if err != nil {
			return "coverage: " + err.Error(), false
		}
		for p, end := range ends {
			if cov[p].End < end {
				return fmt.Sprintf("partition %d covered to %d", p, cov[p].End), false
			}
		}
		if n := snap.Summary.Properties["total-delete-files"]; deletes && (n == "" || n == "0") {
			return "no delete files yet", false
		}
		return "committed", true
	})
}

// upsertRow is a row of the upsert table as js/read.mjs reports it.
type upsertRow struct {
	P     int32   `json:"p"`
	O     string  `json:"o"`
	Key   *string `json:"key"`
	Value *string `json:"value"`
}

// checkUpsertRead compares what icebird read of the upsert table's current snapshot with
// the table from Kafka: every live key once, as its last record, no superseded or
// tombstoned row. The snapshot must have position deletes, so a reader that ignored them
// reads rows too many and fails here.
func checkUpsertRead(t *testing.T, s upsertSection, want map[upsertKey]upsertLive) {
	t.Helper()
	total, err1 := strconv.ParseInt(s.Summary["total-records"], 10, 64)
	dels, err2 := strconv.ParseInt(s.Summary["total-position-deletes"], 10, 64)
	if err1 != nil || err2 != nil || dels == 0 {
		t.Fatalf("snapshot %s has no position deletes (summary %v): the test's updates must delete rows of earlier files", s.SnapshotID, s.Summary)
	}
	if total-dels != int64(len(want)) {
		t.Errorf("snapshot %s: total-records %d - total-position-deletes %d != %d live keys", s.SnapshotID, total, dels, len(want))
	}
	t.Logf("snapshot %s: %d rows read, %d live keys, %d of %d records deleted by %s delete files", s.SnapshotID, len(s.Rows),
		len(want), dels, total, s.Summary["total-delete-files"])
	got := map[upsertKey]bool{}
	bad := 0
	for _, r := range s.Rows {
		if r.Key == nil {
			t.Errorf("row %+v has no key: every record was keyed", r)
			continue
		}
		k := upsertKey{r.P, *r.Key}
		w, ok := want[k]
		switch {
		case got[k]:
			t.Errorf("key %s of partition %d is two rows: a position delete was not applied", decoded(*r.Key), r.P)
		case !ok:
			t.Errorf("key %s of partition %d is a row (offset %s): it is tombstoned", decoded(*r.Key), r.P, r.O)
		case r.O != strconv.FormatInt(w.o, 10) || r.Value == nil || *r.Value != w.value:
			if bad++; bad <= 5 {
				t.Errorf("key %s of partition %d: offset %s value %v, want offset %d value %s", decoded(*r.Key), r.P, r.O, r.Value, w.o, decoded(w.value))
			}
		}
		got[k] = true
	}
	if bad > 5 {
		t.Errorf("... and %d more keys differ", bad-5)
	}
	if len(got) != len(want) {
		t.Errorf("%d of %d live keys are rows (%d rows read; %d deleted of %d)", len(got), len(want), len(s.Rows), dels, total)
	}
}

// decoded is a base64 value as text, for messages.
func decoded(b64 string) string {
	b, err := base64.StdEncoding.DecodeString(b64)
	if err != nil {
		return b64
	}
	return strings.ToValidUTF8(string(b), "?")
}

// upsertSection is read.mjs's icebirdUpsert section: the snapshot icebird read and its
// rows.
type upsertSection struct {
	SnapshotID string            `json:"snapshotId"`
	Summary    map[string]string `json:"summary"`
	Rows       []upsertRow       `json:"rows"`
}

func (s section) upsert(t *testing.T) upsertSection {
	t.Helper()
	var u upsertSection
	if err := json.Unmarshal(s.raw, &u); err != nil {
		t.Fatalf("upsert section: %v", err)
	}
	return u
}
