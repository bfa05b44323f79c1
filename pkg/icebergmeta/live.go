package icebergmeta

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/apache/iceberg-go/table"
	"github.com/google/uuid"

	"github.com/minkhq/mink/pkg/layout"
)

// LiveDir is where a live load's metadata files go, under the table's metadata/:
//
//	<ns>/<table>/metadata/live/<uuid>.metadata.json
//	<ns>/<table>/metadata/live/snap-<snapshot id>-1-<uuid>.avro
//	<ns>/<table>/metadata/live/<uuid>-m<n>.avro
//
// IsWriterKey does not match them: they are not the writer's versions, and they expire
// (mink_meta_files.expires_at) rather than leave with the metadata chain.
const LiveDir = "live/"

// IsLiveKey reports whether key names a live load's metadata file of table ns.name.
func IsLiveKey(ns, name, key string) bool {
	rest, ok := strings.CutPrefix(key, layout.MetadataKey(ns, name, LiveDir))
	return ok && rest != "" && !strings.Contains(rest, "/")
}

// LiveChange is what a live load adds to the committed metadata: the tail files beyond
// the current snapshot's coverage.
type LiveChange struct {
	Add []DataFile // tail files, none of them in the current snapshot
	// AddDeletes are position delete files (upsert tables) of committed and tail files
	// for the keys the tail touches; RemoveDeletes the current snapshot's they replace
	// (each new one has its file's committed positions too).
	AddDeletes, RemoveDeletes []DataFile
	// Coverage of the partitions the tail extends: what the load snapshot covers
	// (committed and tail together); the others keep the current snapshot's.
	Coverage map[int32]Coverage
	Summary  map[string]string // more summary properties ("mink.live.*")
	Now      time.Time         // the database's time: the load snapshot's timestamp
}

// Live returns the metadata of a live load: base's metadata with one more snapshot, an
// append of ch.Add whose parent is base's current snapshot (none for a table without
// one), made current on main. Its manifest list carries the current snapshot's manifests
// as they are (never merged, and only a delete manifest naming a replaced delete file is
// rewritten, under LiveDir) and new manifests for the tail. Every new file is named under LiveDir and the metadata
// JSON's Key too; Version is base's, as the commit pointer does not move. Nothing else
// changes: no expiry, the same properties, the same table UUID, so an engine that
// refreshes from a load's metadata to the next commit's sees the same table.
func Live(ctx context.Context, r *Reader, t Table, base Base, ch LiveChange) (*Result, error) {
	md := base.Metadata
	b, err := table.MetadataBuilderFromBase(md, layout.URI(base.Key))
	if err != nil {
		return nil, fmt.Errorf("icebergmeta: %w", err)
	}
	// Tail files may have a newer schema version or partition spec than the commit the
	// load builds on.
	if err := syncSchemas(b, md, t); err != nil {
		return nil, err
	}
	if err := syncSpecs(b, md, t, currentSchema(t, md)); err != nil {
		return nil, err
	}
	snap, files, err := newSnapshot(ctx, r, t, md, Change{
		Operation: table.OpAppend, Add: ch.Add, AddDeletes: ch.AddDeletes, RemoveDeletes: ch.RemoveDeletes, Coverage: ch.Coverage, Summary: ch.Summary, Now: ch.Now,
	}, snapshotOptions{dir: LiveDir, noMerge: true})
	if err != nil {
		return nil, err
	}
	if err := b.AddSnapshot(snap); err != nil {
		return nil, fmt.Errorf("icebergmeta: add live snapshot: %w", err)
	}
	if err := b.SetSnapshotRef(table.MainBranch, snap.SnapshotID, table.BranchRef); err != nil {
		return nil, fmt.Errorf("icebergmeta: set main: %w", err)
	}
	res := &Result{Snapshot: snap, Files: files}
	return finishAs(t, b, base.Version, res, LiveDir+uuid.NewString()+".metadata.json")
}
