// Package c may hold statements that name no table.
package c

const (
	clock = `SELECT clock_timestamp()`
	table = `SELECT id FROM mink_b`
)
