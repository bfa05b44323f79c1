// Package peers keeps one gRPC client connection per peer address, made on first use and
// reused by every call after it: node-to-node calls (forwarded admin requests, forwarded
// file reads) never pay a dial per request.
package peers

import (
	"errors"
	"sync"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
)

// ErrClosed: the pool was closed (the node is stopping).
var ErrClosed = errors.New("peers: closed: the node is stopping")

// Pool is a set of connections by address. Connections are plaintext unless the pool's
// options carry transport credentials (pkg/node's, with TLS: grpc.WithTransportCredentials
// of the node's client TLS config), which then replace the plaintext default.
type Pool struct {
	opts   []grpc.DialOption
	mu     sync.Mutex
	conns  map[string]*grpc.ClientConn
	closed bool
}

// New makes a pool whose connections use opts (telemetry handlers, credentials, ...).
// Plaintext comes first, so transport credentials in opts override it (the last
// grpc.WithTransportCredentials wins).
func New(opts ...grpc.DialOption) *Pool {
	return &Pool{
		opts:  append([]grpc.DialOption{grpc.WithTransportCredentials(insecure.NewCredentials())}, opts...),
		conns: map[string]*grpc.ClientConn{},
	}
}

// Conn returns the connection to addr, making it on first use.
func (p *Pool) Conn(addr string) (*grpc.ClientConn, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return nil, ErrClosed
	}
	if c := p.conns[addr]; c != nil {
		return c, nil
	}
	// NewClient does not dial: it connects on first use and reconnects by itself.
	c, err := grpc.NewClient(addr, p.opts...)
	if err != nil {
		return nil, err
	}
	p.conns[addr] = c
	return c, nil
}

// Len is the number of connections made.
func (p *Pool) Len() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.conns)
}

// Close closes every connection; later Conn calls fail with ErrClosed.
func (p *Pool) Close() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.closed = true
	var errs []error
	for addr, c := range p.conns {
		errs = append(errs, c.Close())
		delete(p.conns, addr)
	}
	return errors.Join(errs...)
}
