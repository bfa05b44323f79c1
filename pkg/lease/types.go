// Package lease is the seed's Members, Leases and Sharing, exactly: nodes register in
// Postgres and renew every lease_ttl/3; work moves between nodes only through leases whose
// epochs grow at every change of hands; every write made under a lease is fenced by
// Postgres itself; and each node takes its share by the same pure rules (Decide).
//
// Design notes: docs/design/lease.md.
package lease

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/minkhq/mink/pkg/apierr"
)

// Role is what a node does; it decides which leases the node takes.
type Role string

const (
	RoleIndexer    Role = "indexer"    // takes partition leases
	RoleWriter     Role = "writer"     // takes writer leases
	RoleFileServer Role = "fileserver" // holds no lease
)

// ParseRole accepts the role names used in flags and the members table.
func ParseRole(s string) (Role, error) {
	switch r := Role(s); r {
	case RoleIndexer, RoleWriter, RoleFileServer:
		return r, nil
	}
	return "", fmt.Errorf("unknown role %q (want indexer, writer or fileserver)", s)
}

// Kind is the kind of a lease.
type Kind string

const (
	KindPartition Kind = "partition" // one partition of one table: its indexer
	KindWriter    Kind = "writer"    // one table: its writer
)

// Scope names what one lease covers. Partition is -1 for a writer lease.
type Scope struct {
	Kind      Kind
	Table     int64
	Partition int32
}

// PartitionScope and WriterScope build scopes.
func PartitionScope(table int64, partition int32) Scope {
	return Scope{Kind: KindPartition, Table: table, Partition: partition}
}
func WriterScope(table int64) Scope { return Scope{Kind: KindWriter, Table: table, Partition: -1} }

// String is the scope's stable name, "partition/<table>/<partition>" or
// "writer/<table>". Preferences hash it, so it must never change.
func (s Scope) String() string {
	if s.Kind == KindWriter {
		return "writer/" + strconv.FormatInt(s.Table, 10)
	}
	return "partition/" + strconv.FormatInt(s.Table, 10) + "/" + strconv.FormatInt(int64(s.Partition), 10)
}

// ParseScope reads what String wrote.
func ParseScope(s string) (Scope, error) {
	parts := strings.Split(s, "/")
	bad := fmt.Errorf("bad lease scope %q (want partition/<table>/<partition> or writer/<table>)", s)
	switch {
	case len(parts) == 2 && parts[0] == string(KindWriter):
		t, err := strconv.ParseInt(parts[1], 10, 64)
		if err != nil {
			return Scope{}, bad
		}
		return WriterScope(t), nil
	case len(parts) == 3 && parts[0] == string(KindPartition):
		t, err1 := strconv.ParseInt(parts[1], 10, 64)
		p, err2 := strconv.ParseInt(parts[2], 10, 32)
		if err1 != nil || err2 != nil || p < 0 {
			return Scope{}, bad
		}
		return PartitionScope(t, int32(p)), nil
	}
	return Scope{}, bad
}

// Lease is one lease as its holder sees it.
type Lease struct {
	Scope
	Holder    string // node id of the holder
	TableName string // "namespace.name", for logs
	Epoch     int64  // grows at every acquisition; fences every write
	// Expires is the database time at which Postgres lets others take it unless the
	// holder renews: its member row's expiry, as of its last renewal.
	Expires time.Time
}

// Info is one lease as anyone sees it (ListLeases).
type Info struct {
	Scope
	TableName string
	Holder    string // "" when free
	Epoch     int64
	Expires   time.Time // zero when free
}

// Member is one registered node.
type Member struct {
	NodeID   string
	Roles    []Role
	GRPCAddr string            // advertised gRPC address, for forwarded requests
	Addrs    map[string]string // other addresses it serves: "catalog", "s3", "metrics"
	Version  string
	Draining bool
	// MaxPartitions caps the partition leases it holds (0: none); every node's shares
	// take it into account.
	MaxPartitions int
	StartedAt     time.Time
	RenewedAt     time.Time
	ExpiresAt     time.Time
}

// Has reports whether the member has role r.
func (m Member) Has(r Role) bool {
	for _, x := range m.Roles {
		if x == r {
			return true
		}
	}
	return false
}

// The errors carry their kind (apierr), as a client sees them.
var (
	// ErrLeaseLost: a fenced write found that this holder no longer holds that epoch of
	// the lease (taken by another node, released, or expired). Nothing was changed.
	ErrLeaseLost = apierr.New(apierr.Aborted, "lease lost")
	// ErrReplaced: another process registered with this node id; this one must stop.
	ErrReplaced = apierr.New(apierr.Aborted, "node id taken over by another process")
	// ErrLeft: this process left the cluster (Leave); Postgres refuses its incarnation's
	// member row from then on. A new process registers under a new incarnation.
	ErrLeft = apierr.New(apierr.Aborted, "this process left the cluster: its incarnation cannot register or renew again")
	// ErrNoSuchMember: no live member has that id.
	ErrNoSuchMember = apierr.New(apierr.NotFound, "no such live node")
)
