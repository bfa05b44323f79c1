// Package b owns mink_b and may read mink_a.
package b

const (
	own      = "DELETE FROM mink_b WHERE id = $1"
	allowed  = `SELECT b.id FROM mink_b b JOIN mink_a a ON a.id = b.id`
	fragment = " FROM mink_b WHERE id = $1"
	// Reading mink_a is allowed, writing it is not.
	write  = `WITH x AS (SELECT 1) DELETE FROM mink_a`
	notSQL = "mink_a_total is a metric, not a statement"
)
