// Package x is not a store.
package x

const (
	fine  = "select the rows: words, not a statement"
	bad   = `SELECT count(*) FROM mink_a`
	other = "CREATE DATABASE x"
)
