package peers

import (
	"errors"
	"testing"
)

func TestOneConnPerAddrAndClose(t *testing.T) {
	p := New()
	a1, err := p.Conn("127.0.0.1:1")
	if err != nil {
		t.Fatal(err)
	}
	a2, _ := p.Conn("127.0.0.1:1")
	b, _ := p.Conn("127.0.0.1:2")
	if a1 != a2 || a1 == b || p.Len() != 2 {
		t.Fatalf("want one connection per address, got %d", p.Len())
	}
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := p.Conn("127.0.0.1:1"); !errors.Is(err, ErrClosed) {
		t.Fatalf("Conn after Close: %v", err)
	}
}
