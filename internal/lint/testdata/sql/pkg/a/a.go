// Package a owns mink_a.
package a

const (
	own    = `SELECT id FROM mink_a`
	insert = `INSERT INTO mink_a (id) VALUES ($1)`
	// Another store's table: read, then written.
	join  = `SELECT a.id FROM mink_a a JOIN mink_b b ON b.id = a.id`
	write = `UPDATE mink_b SET id = $1`
)
