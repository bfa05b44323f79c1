// Package alpha is a role; it imports its own config, which the rules allow.
package alpha

import "example.com/fixture/services/alpha/config"

// Port is alpha's port.
const Port = config.Port
