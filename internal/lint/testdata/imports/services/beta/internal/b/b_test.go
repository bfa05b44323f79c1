package b

import (
	"testing"

	"example.com/fixture/services/alpha"
)

// A test of beta importing role alpha: a violation too.
func TestAlpha(t *testing.T) { _ = alpha.Port }
