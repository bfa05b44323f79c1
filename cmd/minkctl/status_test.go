package main

import (
	"strings"
	"testing"

	adminv1 "github.com/minkhq/mink/gen/mink/admin/v1"
)

// TestStatusSaysWhetherAuthIsOn: minkctl status prints the node's auth state, loudly
// when it is off.
func TestStatusSaysWhetherAuthIsOn(t *testing.T) {
	for _, c := range []struct {
		on   bool
		want string
	}{{true, "AUTH\ton\n"}, {false, "AUTH\toff (no --auth-config"}} {
		var b strings.Builder
		printStatus(&b, &adminv1.GetStatusResponse{NodeId: "fs-1", AuthEnabled: c.on})
		if !strings.Contains(b.String(), c.want) {
			t.Errorf("auth %v: status\n%s\ndoes not say %q", c.on, b.String(), c.want)
		}
	}
}
