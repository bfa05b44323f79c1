package pgtest

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// The helper must survive what tests do to it: stop, kill, restart on the same port.
func TestStopKillRestart(t *testing.T) {
	c := Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	url, err := c.CreateDB(ctx)
	if err != nil {
		t.Fatal(err)
	}
	query := func() error {
		conn, err := pgx.Connect(ctx, url)
		if err != nil {
			return err
		}
		defer conn.Close(ctx)
		var one int
		return conn.QueryRow(ctx, "SELECT 1").Scan(&one)
	}
	if err := query(); err != nil {
		t.Fatal(err)
	}
	port := c.Port
	for _, stop := range []func() error{c.Stop, c.Kill} {
		if err := stop(); err != nil {
			t.Fatal(err)
		}
		if err := query(); err == nil {
			t.Fatal("query succeeded while the server was down")
		}
		if err := c.Start(); err != nil {
			t.Fatal(err)
		}
		if c.Port != port {
			t.Fatalf("restart moved the port from %d to %d", port, c.Port)
		}
		if err := query(); err != nil {
			t.Fatalf("after restart: %v", err)
		}
	}
}
