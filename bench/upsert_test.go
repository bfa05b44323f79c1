package bench

import (
	"strings"
	"testing"
)

// Item 15's sizes are checked only when it runs, and a bad one names what is wrong.
func TestUpsertConfigValidate(t *testing.T) {
	c := DefaultConfig()
	if err := c.Validate(); err != nil {
		t.Fatalf("defaults: %v", err)
	}
	for _, bad := range []func(*UpsertConfig){
		func(u *UpsertConfig) { u.Partitions = 0 },
		func(u *UpsertConfig) { u.Keys = 2 },          // fewer keys than partitions
		func(u *UpsertConfig) { u.Records = 3999 },    // under 1000 per partition
		func(u *UpsertConfig) { u.Tombstones = 1 },    // nothing but tombstones
		func(u *UpsertConfig) { u.RangeBytes = 1000 }, // under the table property's floor
	} {
		c := DefaultConfig()
		bad(&c.Upsert)
		err := c.Validate()
		if err == nil || !strings.Contains(err.Error(), "upsert:") {
			t.Errorf("%+v: got %v, want an upsert error", c.Upsert, err)
		}
		c.Items = []int{1}
		if err := c.Validate(); err != nil {
			t.Errorf("%+v without item 15: %v", c.Upsert, err)
		}
	}
}
