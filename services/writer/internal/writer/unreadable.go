package writer

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/apache/iceberg-go/table"

	"github.com/minkhq/mink/pkg/icebergmeta"
	"github.com/minkhq/mink/pkg/layout"
	"github.com/minkhq/mink/pkg/objects"
)

// Every snapshot the metadata lists is readable: a commit that replaces files Kafka no
// longer yields (repairs after compaction, expiry after retention) also expires every
// snapshot that names one of them, or a file whose offsets are below the log start,
// whatever retention would keep (icebergmeta.Change.Expire).

// errNotBuilt: a metadata-only version could not be built (see expireOnly).
var errNotBuilt = errors.New("metadata-only version not built")

// expireOnly commits a metadata-only version that expires the snapshots ids, and deletes
// the problems of resolved keys with it; icebergmeta.ErrNoChange when none is in the
// metadata but the current one. iceberg-go stamps such a version with this node's clock,
// and refuses to build it when that clock is far behind the database's: errNotBuilt,
// logged, and the caller tries again later.
func (tw *tableWriter) expireOnly(ctx context.Context, now time.Time, ids []int64, resolved []string) (*icebergmeta.Result, error) {
	res, err := tw.commit(ctx, icebergmeta.Change{Now: now, Expire: ids})
	if errors.Is(err, icebergmeta.ErrNoChange) {
		return nil, err
	}
	if err != nil {
		tw.log.Warn("cannot expire snapshots in a metadata-only version; trying again later", "unreadable_snapshots", len(ids), "error", err)
		return nil, fmt.Errorf("%w: %w", errNotBuilt, err)
	}
	return res, tw.store(ctx, "expire", res, nil, nil, resolved...)
}

// olderFiles returns the files (data and delete files) that snapshots of the metadata
// other than the current one name and the current one does not, with their rows. Rows
// never change, so those read before are kept (tw.older) while a snapshot names them.
func (tw *tableWriter) olderFiles(ctx context.Context) (map[string]icebergmeta.DataFile, error) {
	md := tw.st.base.Metadata
	if md == nil {
		return nil, nil
	}
	current := map[string]bool{}
	for _, d := range tw.st.deletes {
		current[d.Key] = true
	}
	want := map[string]bool{}
	err := tw.eachManifest(ctx, false, func(_ table.Snapshot, _ string, keys []string, first bool) bool {
		if !first {
			return false // seen with an earlier snapshot
		}
		for _, k := range keys {
			if !tw.st.keys[k] && !current[k] {
				want[k] = true
			}
		}
		return false
	})
	if err != nil {
		return nil, err
	}
	var missing []string
	for k := range want {
		if _, ok := tw.older[k]; !ok {
			missing = append(missing, k)
		}
	}
	for k := range tw.older {
		if !want[k] {
			delete(tw.older, k)
		}
	}
	if len(missing) > 0 {
		fs, err := objects.DataFiles(ctx, tw.w.db, missing)
		if err != nil {
			return nil, err
		}
		for _, f := range fs {
			tw.older[f.Key] = f
		}
	}
	return tw.older, nil
}

// unreadable returns the snapshots (the current one included: a commit that adds a
// snapshot may expire it) that name a file of bad, or a data file some of whose offsets
// are below its partition's log start in logStart.
func (tw *tableWriter) unreadable(ctx context.Context, bad map[string]bool, logStart map[int32]int64) ([]int64, error) {
	if tw.st.base.Metadata == nil {
		return nil, nil
	}
	older, err := tw.olderFiles(ctx)
	if err != nil {
		return nil, err
	}
	var cur map[string]icebergmeta.DataFile // the current snapshot's data files, when their offsets matter
	if len(logStart) > 0 {
		cur = make(map[string]icebergmeta.DataFile, len(tw.st.keys))
		for _, fs := range tw.st.live {
			for _, f := range fs {
				cur[f.Key] = f
			}
		}
	}
	below := func(k string) bool {
		f, ok := older[k]
		if !ok {
			f, ok = cur[k]
		}
		ls, known := logStart[f.Partition]
		return ok && known && !f.IsDeletes() && f.Start < ls
	}
	var out []int64
	unreadable := map[string]bool{} // by manifest
	err = tw.eachManifest(ctx, true, func(s table.Snapshot, m string, keys []string, first bool) bool {
		if first {
			unreadable[m] = slices.ContainsFunc(keys, func(k string) bool { return bad[k] || below(k) })
		}
		if unreadable[m] {
			out = append(out, s.SnapshotID)
		}
		return unreadable[m]
	})
	return out, err
}

// eachManifest calls fn with each manifest of each snapshot of the metadata (the current
// one too with current): its path and the keys of its live files, and whether this call
// is the first for it (a manifest carried by several snapshots is given for each, read
// once), until fn says it is done with the snapshot.
func (tw *tableWriter) eachManifest(ctx context.Context, current bool, fn func(s table.Snapshot, m string, keys []string, first bool) (done bool)) error {
	md := tw.st.base.Metadata
	cur := md.CurrentSnapshot()
	keysOf := map[string][]string{}
	for _, s := range md.Snapshots() {
		if !current && cur != nil && s.SnapshotID == cur.SnapshotID {
			continue
		}
		ms, err := tw.reader.ManifestList(ctx, &s)
		if err != nil {
			return err
		}
		for _, m := range ms {
			keys, seen := keysOf[m.FilePath()]
			if !seen {
				uris, err := tw.reader.LivePaths(ctx, m)
				if err != nil {
					return err
				}
				keys = make([]string, 0, len(uris))
				for _, u := range uris {
					k, err := layout.KeyOf(u)
					if err != nil {
						return err
					}
					keys = append(keys, k)
				}
				keysOf[m.FilePath()] = keys
			}
			if fn(s, m.FilePath(), keys, !seen) {
				break
			}
		}
	}
	return nil
}
