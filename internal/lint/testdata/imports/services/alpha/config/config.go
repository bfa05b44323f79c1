// Package config is role alpha's config.
package config

// Port is where alpha listens.
const Port = 1
