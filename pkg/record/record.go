// Package record holds the one shape a Kafka record takes inside Mink, shared by the code
// that reads Kafka (pkg/kafkasrc), decodes values against a table schema, and builds
// Parquet files. Keeping it apart lets those packages stay independent of each other.
package record

import "time"

// Header is one Kafka record header; order within a record is significant and kept.
type Header struct {
	Key   string
	Value []byte
}

// Record is one data record of one partition. Control records (transaction markers) are
// never Records: they advance offsets but are not rows.
type Record struct {
	Partition int32
	Offset    int64
	Timestamp time.Time
	Key       []byte // nil when the record has no key
	Value     []byte // nil for a tombstone
	Headers   []Header
}
