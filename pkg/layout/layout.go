// Package layout names where a table's files live: one bucket for every table, and under
// it "<namespace>/<table>/" with data/ and metadata/ below. The writer names files with
// it; the file servers only look keys up, so the names stay the writer's to choose.
package layout

import (
	"fmt"
	"strings"
)

// Bucket is the one S3 bucket Mink serves.
const Bucket = "mink"

// TablePrefix is the key prefix of every file of a table: "<namespace>/<table>/".
func TablePrefix(namespace, table string) string { return namespace + "/" + table + "/" }

// Location is the table's Iceberg location: "s3://mink/<namespace>/<table>".
func Location(namespace, table string) string {
	return "s3://" + Bucket + "/" + strings.TrimSuffix(TablePrefix(namespace, table), "/")
}

// URI is the s3:// URI of a key in the bucket.
func URI(key string) string { return "s3://" + Bucket + "/" + key }

// KeyOf returns the key of an s3:// URI in the bucket.
func KeyOf(uri string) (string, error) {
	key, ok := strings.CutPrefix(uri, "s3://"+Bucket+"/")
	if !ok || key == "" {
		return "", fmt.Errorf("%q is not a file in bucket %s", uri, Bucket)
	}
	return key, nil
}

// DataKey names the data file of offsets [start, end) of a partition. The checksum makes
// the name unique to the bytes: a file whose bytes change gets a new name, so every name
// is immutable.
func DataKey(namespace, table string, partition int32, start, end int64, sha256hex string) string {
	short := sha256hex
	if len(short) > 16 {
		short = short[:16]
	}
	return fmt.Sprintf("%sdata/_kafka_partition=%d/%020d-%020d-%s.parquet", TablePrefix(namespace, table), partition, start, end, short)
}

// DeleteKey names the position delete file of the data file of offsets [start, end) of
// a partition (upsert tables), computed up to the partition's offset coverEnd, by its
// checksum as DataKey does.
func DeleteKey(namespace, table string, partition int32, start, end, coverEnd int64, sha256hex string) string {
	short := sha256hex
	if len(short) > 16 {
		short = short[:16]
	}
	return fmt.Sprintf("%sdata/_kafka_partition=%d/%020d-%020d-deletes-%020d-%s.parquet", TablePrefix(namespace, table), partition, start, end, coverEnd, short)
}

// MetadataKey names a metadata file ("v12-<uuid>.metadata.json", "snap-...avro").
func MetadataKey(namespace, table, name string) string {
	return TablePrefix(namespace, table) + "metadata/" + name
}
