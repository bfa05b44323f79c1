package main

import (
	"context"
	"fmt"
	"net"
	"sync"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/status"

	"github.com/minkhq/mink/pkg/flagenv"
)

// A failed call is told as what to change: which flag or MINK_* variable, rather than
// gRPC's transport words. connTrace records how reaching --addr went, so "nothing
// listens there" and "TLS failed" are known from what happened, not read from text.

// connTrace is what the dialer and the TLS handshake saw.
type connTrace struct {
	mu        sync.Mutex
	dialErr   error // the last connect that failed
	handshake error // the last TLS handshake that failed
	connected bool  // a connection was made (and its handshake done)
}

func (t *connTrace) dial(ctx context.Context, addr string) (net.Conn, error) {
	conn, err := (&net.Dialer{}).DialContext(ctx, "tcp", addr)
	if err != nil {
		t.mu.Lock()
		t.dialErr = err
		t.mu.Unlock()
	}
	return conn, err
}

func (t *connTrace) result() (dialErr, handshake error, connected bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.dialErr, t.handshake, t.connected
}

// tracedCreds are the dial's transport credentials, recording the handshake's outcome.
type tracedCreds struct {
	credentials.TransportCredentials
	t *connTrace
}

func (c tracedCreds) ClientHandshake(ctx context.Context, authority string, raw net.Conn) (net.Conn, credentials.AuthInfo, error) {
	conn, info, err := c.TransportCredentials.ClientHandshake(ctx, authority, raw)
	c.t.mu.Lock()
	if err != nil {
		c.t.handshake = err
	} else {
		c.t.connected = true
	}
	c.t.mu.Unlock()
	return conn, info, err
}

func (c tracedCreds) Clone() credentials.TransportCredentials {
	return tracedCreds{c.TransportCredentials.Clone(), c.t}
}

// explain is the message of a failed command: a gRPC error with what to do about it
// when its cause is known, any other error as it is.
func (c *cli) explain(err error) string {
	st, ok := status.FromError(err)
	if !ok {
		return err.Error()
	}
	msg := fmt.Sprintf("%s: %s", st.Code(), st.Message())
	dialErr, handshake, connected := c.trace.result()
	switch {
	case st.Code() == codes.Unavailable && handshake != nil && !connected:
		return fmt.Sprintf("Unavailable: TLS with the node at %s (%s) failed: %v\n"+
			"Set --tls-ca-file or MINK_TLS_CA_FILE to the CA that signed the node's certificate, and --tls-server-name or "+
			"MINK_TLS_SERVER_NAME to the name it carries when --addr reaches it by another (%s).",
			c.addr, c.sourceOf("addr"), handshake, msg)
	case st.Code() == codes.Unavailable && !connected:
		// Nothing listens there, or the name does not resolve: no connection was made.
		cause := st.Message()
		if dialErr != nil {
			cause = dialErr.Error()
		}
		also := ""
		if c.cmd == "scan" {
			also = " (scan asks that node where a catalog is; or set --catalog or MINK_CATALOG)"
		}
		return fmt.Sprintf("Unavailable: no Mink node answers at %s (%s): %s\n"+
			"Is the cluster running (make dev)? Set --addr or MINK_ADDR to a node's gRPC address%s (make dev's banner prints export MINK_ADDR=...).",
			c.addr, c.sourceOf("addr"), cause, also)
	case st.Code() == codes.Unauthenticated && c.token == "":
		return fmt.Sprintf("Unauthenticated: the node at %s checks credentials and none were given: set MINK_TOKEN or --token to a principal's secret "+
			"(make dev's banner prints export MINK_TOKEN=...; minkctl auth secret --auth-config FILE prints one)", c.addr)
	case st.Code() == codes.Unauthenticated:
		return fmt.Sprintf("%s\nThe token (%s) was refused: set MINK_TOKEN or --token to a principal's secret or a token the catalog issued.",
			msg, c.sourceOf("token"))
	}
	return msg
}

// sourceOf says where a global flag's value came from: the command line, its MINK_*
// twin, or its default.
func (c *cli) sourceOf(name string) string {
	if env, ok := c.src[name]; ok {
		return "from " + env
	}
	if c.given[name] {
		return "from --" + name
	}
	return "the default; neither --" + name + " nor " + flagenv.EnvName(name) + " is set"
}
