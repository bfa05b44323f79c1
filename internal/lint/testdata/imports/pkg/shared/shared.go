// Package shared is a library the roles share, importing a role: a violation.
package shared

import "example.com/fixture/services/alpha/config"

// Port is alpha's port.
const Port = config.Port
