// Package b is beta's internal package; only its test imports another role.
package b
