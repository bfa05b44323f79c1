// Package h is a test harness.
package h

const inHarness = `UPDATE mink_a SET id = 0`
