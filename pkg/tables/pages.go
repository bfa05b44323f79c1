package tables

// Keyset pages of tables and namespaces, for listings a client pages through (the
// catalog's pageToken): each page starts after the last name the one before it ended
// with, in byte order (COLLATE "C", the same on every server whatever its locale), so
// pages stay consistent while tables come and go between them: nothing is listed twice,
// and a table there all along is listed once.

import (
	"context"

	"github.com/jackc/pgx/v5"

	"github.com/minkhq/mink/pkg/pg"
)

// ListPage returns, by name, the tables of namespace whose names sort after after ("":
// from the first), at most limit (0: all). With committed, only tables whose writer has
// stored their first metadata (what the catalog lists and loads).
func ListPage(ctx context.Context, db pg.DB, namespace, after string, limit int, committed bool) ([]Table, error) {
	rows, err := db.Query(ctx, `SELECT `+columns+` FROM mink_tables
		WHERE namespace = $1 AND name COLLATE "C" > $2
		  AND (NOT $3 OR EXISTS (SELECT 1 FROM mink_table_meta m WHERE m.table_id = mink_tables.id))
		ORDER BY name COLLATE "C" LIMIT NULLIF($4, 0)`, namespace, after, committed, limit)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (Table, error) { return scan(r) })
}

// NamespacesPage returns the namespaces that have a table and sort after after, in
// order, at most limit (0: all).
func NamespacesPage(ctx context.Context, db pg.DB, after string, limit int) ([]string, error) {
	rows, err := db.Query(ctx, `SELECT DISTINCT namespace COLLATE "C" AS ns FROM mink_tables
		WHERE namespace COLLATE "C" > $1 ORDER BY ns LIMIT NULLIF($2, 0)`, after, limit)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, pgx.RowTo[string])
}

// ListAfter returns the tables of namespace ("": of every namespace) that sort after
// afterNS.afterName by namespace then name in byte order, at most limit (0: all): the
// admin API's pages of ListTables.
func ListAfter(ctx context.Context, db pg.DB, namespace, afterNS, afterName string, limit int) ([]Table, error) {
	rows, err := db.Query(ctx, `SELECT `+columns+` FROM mink_tables
		WHERE ($1 = '' OR namespace = $1)
		  AND (namespace COLLATE "C", name COLLATE "C") > ($2 COLLATE "C", $3 COLLATE "C")
		ORDER BY namespace COLLATE "C", name COLLATE "C" LIMIT NULLIF($4, 0)`, namespace, afterNS, afterName, limit)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (Table, error) { return scan(r) })
}
