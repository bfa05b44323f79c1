// Package d holds a statement still to move to its store (pending).
package d

const moving = `SELECT id FROM mink_a`
