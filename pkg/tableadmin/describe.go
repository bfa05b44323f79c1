package tableadmin

import (
	"context"
	"encoding/base64"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/table"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	adminv1 "github.com/minkhq/mink/gen/mink/admin/v1"
	"github.com/minkhq/mink/pkg/apierr"
	"github.com/minkhq/mink/pkg/icebergmeta"
	"github.com/minkhq/mink/pkg/layout"
	"github.com/minkhq/mink/pkg/objects"
	"github.com/minkhq/mink/pkg/ranges"
	"github.com/minkhq/mink/pkg/tables"
)

// metaReadTimeout bounds each read of a stored metadata file while describing a table.
const metaReadTimeout = 10 * time.Second

// committed is what a table's current snapshot holds.
type committed struct {
	at        *timestamppb.Timestamp // nil before the first commit
	snapshots []*adminv1.Snapshot
	files     map[int32]objects.PartitionFiles // nil: not counted
}

// committedCache keeps what was read of recent metadata files, by key: a metadata file
// never changes, so neither does what it says, and a table described again (the
// console refreshing, minkctl status --cluster) is not read again until it commits.
type committedCache struct {
	mu sync.Mutex
	m  map[string]committed
}

// maxCommitted bounds the cache: past it, it starts again empty.
const maxCommitted = 1024

func (c *committedCache) get(key string, files bool) (committed, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	v, ok := c.m[key]
	return v, ok && (!files || v.files != nil)
}

func (c *committedCache) put(key string, v committed) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil || len(c.m) >= maxCommitted {
		c.m = map[string]committed{}
	}
	c.m[key] = v
}

// committedOf reads table t's current metadata: its snapshots and, with files, what the
// current snapshot's data files hold per partition (its manifests are read for it).
func (s *Service) committedOf(ctx context.Context, t tables.Table, files bool) (committed, error) {
	key, _, found, err := objects.CurrentMetadata(ctx, s.DB, t.ID, false)
	if err != nil || !found {
		return committed{}, err
	}
	if c, ok := s.committed.get(key, files); ok {
		return c, nil
	}
	c, err := s.readCommitted(ctx, t, key, files)
	if err == nil {
		s.committed.put(key, c)
	}
	return c, err
}

// readCommitted reads what metadata file key of table t says.
func (s *Service) readCommitted(ctx context.Context, t tables.Table, key string, files bool) (committed, error) {
	var c committed
	body, err := objects.MetaFile(ctx, s.DB, t.ID, key)
	if err != nil {
		return c, fmt.Errorf("table %s.%s: its current metadata: %w", t.Namespace, t.Name, err)
	}
	md, err := table.ParseMetadataBytes(body)
	if err != nil {
		return c, fmt.Errorf("table %s.%s: its current metadata: %w", t.Namespace, t.Name, err)
	}
	for _, sn := range md.Snapshots() {
		out := &adminv1.Snapshot{SnapshotId: sn.SnapshotID, CommittedAt: timestamppb.New(time.UnixMilli(sn.TimestampMs))}
		if sn.SchemaID != nil {
			out.SchemaId = int32(*sn.SchemaID)
		}
		if sn.Summary != nil {
			out.Operation = string(sn.Summary.Operation)
			p := sn.Summary.Properties
			out.AddedRecords, out.TotalRecords = summaryInt(p, "added-records"), summaryInt(p, "total-records")
			out.AddedFiles, out.TotalFiles = summaryInt(p, "added-data-files"), summaryInt(p, "total-data-files")
		}
		c.snapshots = append(c.snapshots, out)
	}
	cur := md.CurrentSnapshot()
	if cur == nil {
		return c, nil
	}
	c.at = timestamppb.New(time.UnixMilli(cur.TimestampMs))
	if !files {
		return c, nil
	}
	c.files = map[int32]objects.PartitionFiles{}
	fio := icebergmeta.FileIO(ctx, objects.MetaStore(s.DB, t.ID, metaReadTimeout))
	manifests, err := cur.Manifests(fio)
	if err != nil {
		return c, fmt.Errorf("table %s.%s: the current snapshot's manifest list: %w", t.Namespace, t.Name, err)
	}
	var keys []string
	for _, m := range manifests {
		if m.ManifestContent() != iceberg.ManifestContentData {
			continue
		}
		for e, err := range m.Entries(fio, true) {
			if err != nil {
				return c, fmt.Errorf("table %s.%s: a manifest of the current snapshot: %w", t.Namespace, t.Name, err)
			}
			if key, err := layout.KeyOf(e.DataFile().FilePath()); err == nil {
				keys = append(keys, key)
			}
		}
	}
	if len(keys) > 0 {
		c.files, err = objects.ByPartition(ctx, s.DB, t.ID, keys)
	}
	return c, err
}

func summaryInt(p iceberg.Properties, k string) int64 {
	n, _ := strconv.ParseInt(p[k], 10, 64)
	return n
}

// schemaVersions are table t's schema versions, each with the top-level columns it added
// to the one before.
func (s *Service) schemaVersions(ctx context.Context, t tables.Table) ([]*adminv1.SchemaVersion, error) {
	vs, err := tables.Versions(ctx, s.DB, t.ID)
	if err != nil {
		return nil, err
	}
	var out []*adminv1.SchemaVersion
	seen := map[int]bool{}
	for i, v := range vs {
		sv := &adminv1.SchemaVersion{Version: int32(v.ID), SchemaId: int32(v.Schema.ID)}
		for _, f := range v.Schema.Fields() {
			if i > 0 && !seen[f.ID] {
				sv.Added = append(sv.Added, &adminv1.SchemaColumn{FieldId: int32(f.ID), Name: f.Name, Type: f.Type.String()})
			}
			seen[f.ID] = true
		}
		out = append(out, sv)
	}
	return out, nil
}

// partitionLag is PartitionStatus.lag: zero when caught up, else how long indexing has
// not moved the end.
func partitionLag(p ranges.Partition, lagRecords int64) *durationpb.Duration {
	switch {
	case lagRecords < 0:
		return nil
	case lagRecords == 0:
		return durationpb.New(0)
	}
	return durationpb.New(p.Idle)
}

// summarize is a table's TableSummary from its described partitions.
func summarize(ps []*adminv1.PartitionStatus, committedAt *timestamppb.Timestamp) *adminv1.TableSummary {
	sum := &adminv1.TableSummary{CommittedAt: committedAt, Lag: durationpb.New(0)}
	for _, p := range ps {
		switch {
		case p.LagRecords < 0 || sum.LagRecords < 0:
			sum.LagRecords = -1
		default:
			sum.LagRecords += p.LagRecords
		}
		if p.GetLag().AsDuration() > sum.Lag.AsDuration() {
			sum.Lag = p.Lag
		}
		if p.IndexError != "" {
			sum.PausedPartitions++
		}
		if p.Holder == "" {
			sum.UnheldPartitions++
		}
	}
	return sum
}

// A page token of ListTables is the last table of the page before, "namespace.name",
// in URL-safe base64: opaque to clients, checked when it comes back.
func pageToken(t tables.Table) string {
	return base64.RawURLEncoding.EncodeToString([]byte(t.Namespace + "." + t.Name))
}

func parsePageToken(tok string) (ns, name string, err error) {
	if tok == "" {
		return "", "", nil
	}
	b, err := base64.RawURLEncoding.DecodeString(tok)
	ns, name, ok := strings.Cut(string(b), ".")
	if err != nil || !ok || ns == "" || name == "" {
		return "", "", apierr.Invalid("page_token", "not a token this API gave (pass next_page_token as it came)")
	}
	return ns, name, nil
}
