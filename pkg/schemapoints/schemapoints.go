// Package schemapoints is what a schema point is: per partition, an offset and the
// decoding records decode with from there to the next point, so that every build of a
// record agrees on its schema version. A range or tail file decodes with the point in
// force at its start and never spans another. The points are stored with their
// partitions, by pkg/ranges (Points, AddPoints, CheckPoints), under the partition's row
// lock, so a build in flight when a point is added is refused and built again.
package schemapoints

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"sort"
)

// Decoding is what a file's rows were decoded with besides its records: the table's
// schema version and, in latest mode, the registry ids of values and keys. The JSON
// names are those of parquetbuild.Settings, where every file records them.
type Decoding struct {
	Version       int `json:"table_version,omitempty"`
	ValueSchemaID int `json:"value_schema_id,omitempty"`
	KeySchemaID   int `json:"key_schema_id,omitempty"`
}

func (d Decoding) String() string {
	return fmt.Sprintf("version %d, value schema %d, key schema %d", d.Version, d.ValueSchemaID, d.KeySchemaID)
}

// Of is the decoding a file's recorded settings (parquetbuild.Settings as JSON) name.
func Of(settings []byte) (Decoding, error) {
	var d Decoding
	if err := json.Unmarshal(settings, &d); err != nil {
		return d, fmt.Errorf("schemapoints: recorded settings: %w", err)
	}
	return d, nil
}

// Point is a decoding in force from offset From of its partition on.
type Point struct {
	From int64
	Decoding
}

// Points are one partition's points, by offset. The first is at offset 0.
type Points []Point

// At is the decoding in force at offset o; ok is false before the first point.
func (ps Points) At(o int64) (d Decoding, ok bool) {
	i := sort.Search(len(ps), func(i int) bool { return ps[i].From > o })
	if i == 0 {
		return Decoding{}, false
	}
	return ps[i-1].Decoding, true
}

// Next is the offset of the first point after o: where a file that starts at o ends at
// the latest (math.MaxInt64 when there is none).
func (ps Points) Next(o int64) int64 {
	i := sort.Search(len(ps), func(i int) bool { return ps[i].From > o })
	if i == len(ps) {
		return math.MaxInt64
	}
	return ps[i].From
}

// ErrDecodingMoved: a file is not recorded because it does not decode as the point in
// force at its start says, or a point lies inside it (a schema change took effect while
// it was built). Its builder builds it again with the points as they are now.
var ErrDecodingMoved = errors.New("schemapoints: a schema change took effect inside the file; build it again")
