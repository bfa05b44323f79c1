package files

import (
	"context"
	"log/slog"
	"maps"
	"sync"
	"time"

	"github.com/minkhq/mink/pkg/lease"
	"github.com/minkhq/mink/pkg/owner"
	"github.com/minkhq/mink/pkg/pg"
)

// members is this node's view of the live file servers, refreshed from Postgres every
// interval rather than read per request. When Postgres cannot be read the last list
// known is kept: owners must stay where the cached files are for cached reads to go on
// through a Postgres outage.
type members struct {
	db       pg.DB
	self     string
	interval time.Duration
	log      *slog.Logger

	mu      sync.RWMutex
	nodes   []string          // file-server node ids
	addrs   map[string]string // node id -> advertised gRPC address
	failing bool              // the last refresh failed (logged once per outage)
}

// refresh reads the member list once.
func (m *members) refresh(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, max(m.interval, time.Second))
	defer cancel()
	ms, err := lease.ListMembers(ctx, m.db)
	if err != nil {
		m.mu.Lock()
		first := !m.failing
		m.failing = true
		m.mu.Unlock()
		if first && ctx.Err() == nil {
			m.log.Warn("cannot read the member list; owners stay as last known", "error", err)
		}
		return err
	}
	var nodes []string
	addrs := map[string]string{}
	for _, mb := range ms {
		if mb.Has(lease.RoleFileServer) {
			nodes = append(nodes, mb.NodeID)
			addrs[mb.NodeID] = mb.GRPCAddr
		}
	}
	m.mu.Lock()
	if m.failing {
		m.log.Info("member list readable again", "file_servers", len(nodes))
	}
	m.nodes, m.addrs, m.failing = nodes, addrs, false
	m.mu.Unlock()
	return nil
}

// run refreshes until ctx ends.
func (m *members) run(ctx context.Context) {
	t := time.NewTicker(m.interval)
	defer t.Stop()
	for {
		m.refresh(ctx)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// ownerOf returns the owner of key (decided by its OwnerKey) and its gRPC address. With no file server known (no
// list read yet, or none registered) this node serves everything itself.
func (m *members) ownerOf(key string) (node, addr string) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	o := owner.Of(OwnerKey(key), m.nodes)
	if o == "" {
		return m.self, ""
	}
	return o, m.addrs[o]
}

// snapshot returns the file servers known now and their gRPC addresses.
func (m *members) snapshot() map[string]string {
	m.mu.RLock()
	defer m.mu.RUnlock()
	return maps.Clone(m.addrs)
}

// owns reports whether this node owns key by the member list read last: false while no
// list has been read, when ownerOf would serve a key here anyway.
func (m *members) owns(key string) bool {
	m.mu.RLock()
	defer m.mu.RUnlock()
	return owner.Of(OwnerKey(key), m.nodes) == m.self
}
