package objects

import (
	"context"

	"github.com/minkhq/mink/pkg/pg"
)

// PartitionFiles is what a set of data files of a table holds of one Kafka partition.
type PartitionFiles struct {
	Files int64
	End   int64 // the first offset past every one of them
}

// ByPartition groups the data files of table at keys (a snapshot's, say) by their Kafka
// partition; keys that are no data file of the table are left out.
func ByPartition(ctx context.Context, db pg.DB, table int64, keys []string) (map[int32]PartitionFiles, error) {
	rows, err := db.Query(ctx, `SELECT partition, count(*), max(end_offset) FROM mink_data_files
		WHERE table_id = $1 AND key = ANY($2) GROUP BY partition`, table, keys)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := map[int32]PartitionFiles{}
	for rows.Next() {
		var p int32
		var f PartitionFiles
		if err := rows.Scan(&p, &f.Files, &f.End); err != nil {
			return nil, err
		}
		out[p] = f
	}
	return out, rows.Err()
}
