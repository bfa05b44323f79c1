package plan

// The JSON of planning results, as the spec has them and as Java's parsers
// (ContentFileParser, RESTFileScanTaskParser) write them: data files with their spec's
// partition values, counts as {keys, values}, bounds as the hex of their binary
// single-value form, and each task's residual filter.

import (
	"encoding/hex"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/table"
	"github.com/google/uuid"
)

// statusCompleted is the only status Mink answers: it plans synchronously.
const statusCompleted = "completed"

// completed is the spec's CompletedPlanningWithIDResult (PlanID omitted: the
// fetchPlanningResult form).
type completed struct {
	Status             string              `json:"status"`
	PlanID             string              `json:"plan-id,omitempty"`
	FileScanTasks      []json.RawMessage   `json:"file-scan-tasks"`
	PlanTasks          []string            `json:"plan-tasks,omitempty"`
	StorageCredentials []StorageCredential `json:"storage-credentials,omitempty"`
}

// scanTasks is the spec's FetchScanTasksResult.
type scanTasks struct {
	FileScanTasks []json.RawMessage `json:"file-scan-tasks"`
}

// StorageCredential is the spec's StorageCredential: FileIO config for the files under
// a prefix.
type StorageCredential struct {
	Prefix string            `json:"prefix"`
	Config map[string]string `json:"config"`
}

type fileScanTask struct {
	DataFile       dataFile        `json:"data-file"`
	ResidualFilter json.RawMessage `json:"residual-filter,omitempty"`
}

// dataFile is the spec's DataFile (a ContentFile of content "data").
type dataFile struct {
	SpecID          int32             `json:"spec-id"`
	Content         string            `json:"content"`
	FilePath        string            `json:"file-path"`
	FileFormat      string            `json:"file-format"`
	Partition       []json.RawMessage `json:"partition"`
	FileSizeInBytes int64             `json:"file-size-in-bytes"`
	RecordCount     int64             `json:"record-count"`
	ColumnSizes     *countMap         `json:"column-sizes,omitempty"`
	ValueCounts     *countMap         `json:"value-counts,omitempty"`
	NullValueCounts *countMap         `json:"null-value-counts,omitempty"`
	NaNValueCounts  *countMap         `json:"nan-value-counts,omitempty"`
	LowerBounds     *valueMap         `json:"lower-bounds,omitempty"`
	UpperBounds     *valueMap         `json:"upper-bounds,omitempty"`
	KeyMetadata     string            `json:"key-metadata,omitempty"`
	SplitOffsets    []int64           `json:"split-offsets,omitempty"`
	SortOrderID     *int              `json:"sort-order-id,omitempty"`
	FirstRowID      *int64            `json:"first-row-id,omitempty"`
}

type countMap struct {
	Keys   []int   `json:"keys"`
	Values []int64 `json:"values"`
}

type valueMap struct {
	Keys   []int    `json:"keys"`
	Values []string `json:"values"`
}

// counts is m's entries for the fields in keep, by field id; nil when none.
func counts(m map[int]int64, keep map[int]bool) *countMap {
	var out countMap
	for _, id := range slices.Sorted(maps.Keys(m)) {
		if keep[id] {
			out.Keys, out.Values = append(out.Keys, id), append(out.Values, m[id])
		}
	}
	if len(out.Keys) == 0 {
		return nil
	}
	return &out
}

// bounds is m's entries for the fields in keep, each as Java's SingleValueParser
// writes a binary value: upper-case hex.
func bounds(m map[int][]byte, keep map[int]bool) *valueMap {
	var out valueMap
	for _, id := range slices.Sorted(maps.Keys(m)) {
		if keep[id] {
			out.Keys, out.Values = append(out.Keys, id), append(out.Values, strings.ToUpper(hex.EncodeToString(m[id])))
		}
	}
	if len(out.Keys) == 0 {
		return nil
	}
	return &out
}

// encodeTask is one file scan task: its data file, with the column statistics of the
// fields in stats, and its residual (nil: none sent).
func encodeTask(md table.Metadata, task table.FileScanTask, stats map[int]bool, residual json.RawMessage) (json.RawMessage, error) {
	f := task.File
	spec := md.PartitionSpecByID(int(f.SpecID()))
	if spec == nil {
		return nil, fmt.Errorf("data file %s: no partition spec %d", f.FilePath(), f.SpecID())
	}
	part, err := partitionValues(*spec, f.Partition())
	if err != nil {
		return nil, fmt.Errorf("data file %s: %w", f.FilePath(), err)
	}
	df := dataFile{
		SpecID: f.SpecID(), Content: "data", FilePath: f.FilePath(), FileFormat: strings.ToLower(string(f.FileFormat())),
		Partition: part, FileSizeInBytes: f.FileSizeBytes(), RecordCount: f.Count(),
		SplitOffsets: f.SplitOffsets(), SortOrderID: f.SortOrderID(), FirstRowID: f.FirstRowID(),
	}
	if k := f.KeyMetadata(); len(k) > 0 {
		df.KeyMetadata = strings.ToUpper(hex.EncodeToString(k))
	}
	if len(stats) > 0 {
		df.ColumnSizes = counts(f.ColumnSizes(), stats)
		df.ValueCounts = counts(f.ValueCounts(), stats)
		df.NullValueCounts = counts(f.NullValueCounts(), stats)
		df.NaNValueCounts = counts(f.NaNValueCounts(), stats)
		df.LowerBounds = bounds(f.LowerBoundValues(), stats)
		df.UpperBounds = bounds(f.UpperBoundValues(), stats)
	}
	return json.Marshal(fileScanTask{DataFile: df, ResidualFilter: residual})
}

// partitionValues are a file's partition values in the order of spec's fields, each in
// the spec's single-value JSON form.
func partitionValues(spec iceberg.PartitionSpec, values map[int]any) ([]json.RawMessage, error) {
	out := make([]json.RawMessage, 0, spec.NumFields())
	for _, pf := range spec.Fields() {
		b, err := singleValue(values[pf.FieldID])
		if err != nil {
			return nil, fmt.Errorf("partition field %s: %w", pf.Name, err)
		}
		out = append(out, b)
	}
	return out, nil
}

// singleValue is v as the spec's JSON single-value serialization has it.
func singleValue(v any) (json.RawMessage, error) {
	switch x := v.(type) {
	case nil:
		return json.RawMessage("null"), nil
	case bool, int32, int64, float32, float64, string:
		return json.Marshal(x)
	case iceberg.Date:
		return json.Marshal(x.ToTime().Format("2006-01-02"))
	case []byte:
		return json.Marshal(strings.ToUpper(hex.EncodeToString(x)))
	case uuid.UUID:
		return json.Marshal(x.String())
	case iceberg.Decimal:
		return json.Marshal(x.String())
	}
	return nil, fmt.Errorf("a partition value of type %T has no JSON form here", v)
}
