package icebergmeta

import (
	"encoding/json"
	"fmt"
	"strconv"
)

// RefsOnly is metadata JSON with only the snapshots a branch or tag references: what the
// REST spec's loadTable answers for snapshots=refs. A live load's snapshot is main's, so
// it stays. The other snapshots leave, and with them their statistics files; the
// snapshot log keeps only the entries after the last one naming a snapshot that left
// (as Java's REST server trims it), so the log, every ref and current-snapshot-id name
// snapshots the metadata holds. All else is kept as it is, numbers to the digit (ids
// above 2^53 included). Metadata with nothing to leave out comes back unchanged; other
// metadata is re-encoded with its keys sorted, the same bytes for the same input.
func RefsOnly(metadata []byte) ([]byte, error) {
	var top map[string]json.RawMessage
	if err := json.Unmarshal(metadata, &top); err != nil {
		return nil, fmt.Errorf("icebergmeta: metadata JSON: %w", err)
	}
	var snapshots []json.RawMessage
	if err := unmarshalIf(top["snapshots"], &snapshots); err != nil || len(snapshots) == 0 {
		return metadata, err
	}
	var refs map[string]struct {
		ID json.Number `json:"snapshot-id"`
	}
	if err := unmarshalIf(top["refs"], &refs); err != nil {
		return nil, err
	}
	keep := map[int64]bool{}
	for name, r := range refs {
		id, err := strconv.ParseInt(r.ID.String(), 10, 64)
		if err != nil {
			return nil, fmt.Errorf("icebergmeta: ref %s: snapshot-id %q", name, r.ID)
		}
		keep[id] = true
	}
	if raw, ok := top["current-snapshot-id"]; ok && string(raw) != "null" {
		id, err := strconv.ParseInt(string(raw), 10, 64)
		if err != nil {
			return nil, fmt.Errorf("icebergmeta: current-snapshot-id %s", raw)
		}
		keep[id] = id >= 0 // -1: none (format v1's way)
	}
	kept, err := filterBySnapshot(snapshots, keep)
	if err != nil {
		return nil, err
	}
	if len(kept) == len(snapshots) {
		return metadata, nil
	}
	if top["snapshots"], err = json.Marshal(append([]json.RawMessage{}, kept...)); err != nil {
		return nil, err
	}

	var log []json.RawMessage
	if err := unmarshalIf(top["snapshot-log"], &log); err != nil {
		return nil, err
	}
	if log != nil {
		var trimmed []json.RawMessage
		for _, e := range log {
			id, err := snapshotIDOf(e)
			if err != nil {
				return nil, err
			}
			if keep[id] {
				trimmed = append(trimmed, e)
			} else {
				trimmed = trimmed[:0] // the history before a gap is no longer the table's
			}
		}
		if top["snapshot-log"], err = json.Marshal(append([]json.RawMessage{}, trimmed...)); err != nil {
			return nil, err
		}
	}
	for _, k := range []string{"statistics", "partition-statistics"} {
		var files []json.RawMessage
		if err := unmarshalIf(top[k], &files); err != nil {
			return nil, err
		}
		if files == nil {
			continue
		}
		f, err := filterBySnapshot(files, keep)
		if err != nil {
			return nil, err
		}
		if top[k], err = json.Marshal(append([]json.RawMessage{}, f...)); err != nil {
			return nil, err
		}
	}
	return json.Marshal(top)
}

func unmarshalIf(raw json.RawMessage, v any) error {
	if raw == nil {
		return nil
	}
	if err := json.Unmarshal(raw, v); err != nil {
		return fmt.Errorf("icebergmeta: metadata JSON: %w", err)
	}
	return nil
}

// snapshotIDOf reads the snapshot-id of a snapshot, log entry or statistics file.
func snapshotIDOf(raw json.RawMessage) (int64, error) {
	var v struct {
		ID json.Number `json:"snapshot-id"`
	}
	if err := json.Unmarshal(raw, &v); err != nil {
		return 0, fmt.Errorf("icebergmeta: metadata JSON: %w", err)
	}
	id, err := strconv.ParseInt(v.ID.String(), 10, 64)
	if err != nil {
		return 0, fmt.Errorf("icebergmeta: metadata JSON: snapshot-id %q", v.ID)
	}
	return id, nil
}

func filterBySnapshot(items []json.RawMessage, keep map[int64]bool) ([]json.RawMessage, error) {
	var out []json.RawMessage
	for _, it := range items {
		id, err := snapshotIDOf(it)
		if err != nil {
			return nil, err
		}
		if keep[id] {
			out = append(out, it)
		}
	}
	return out, nil
}
