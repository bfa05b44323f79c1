// Package beta is another role, importing alpha's config: a violation.
package beta

import "example.com/fixture/services/alpha/config"

// Port is alpha's port, as beta should not know it.
const Port = config.Port
