package admin

import (
	"context"
	"errors"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/minkhq/mink/pkg/apierr"
	"github.com/minkhq/mink/pkg/auth"
	"github.com/minkhq/mink/pkg/lease"
	"github.com/minkhq/mink/pkg/names"
)

const (
	// mdServedBy is the trailer with which a node signs every admin answer it serves
	// itself. A forwarding node that gets an error without it knows the target never
	// answered (unreachable), rather than answered with that error.
	mdServedBy = "mink-served-by"
	// mdForwardedBy marks a forwarded request, so that a request which reaches the
	// wrong node (a stale advertised address) fails instead of bouncing on.
	mdForwardedBy = "mink-forwarded-by"
)

// nodeRequest is every AdminService request: it names the node that must serve it.
type nodeRequest interface {
	proto.Message
	GetNode() string
}

// serve runs local when req is for this node, and forwards it otherwise. Every error
// leaves through apierr.
func serve[Req nodeRequest, Resp proto.Message](s *Server, ctx context.Context, method string, req Req,
	local func(context.Context, Req) (Resp, error)) (Resp, error) {
	var zero Resp
	target := req.GetNode()
	if err := names.Check("node", names.Node, target); err != nil {
		return zero, apierr.GRPC(err)
	}
	if target == "" || target == s.self {
		_ = grpc.SetTrailer(ctx, metadata.Pairs(mdServedBy, s.self))
		resp, err := local(ctx, req)
		if err != nil {
			return zero, apierr.GRPC(err)
		}
		return resp, nil
	}
	// A nil *T answers ProtoReflect, so this makes an empty response of Resp's type.
	resp := zero.ProtoReflect().New().Interface().(Resp)
	if err := s.forward(ctx, method, target, req, resp); err != nil {
		return zero, apierr.GRPC(err)
	}
	return resp, nil
}

// forward sends req to the live node named target and fills resp with its answer. An
// error the target answered with is returned unchanged.
func (s *Server) forward(ctx context.Context, method, target string, req, resp proto.Message) error {
	if md, ok := metadata.FromIncomingContext(ctx); ok && len(md.Get(mdForwardedBy)) > 0 {
		return apierr.New(apierr.Unavailable,
			"node %q: a request forwarded by %s for it reached node %q instead; its advertised address is stale",
			target, md.Get(mdForwardedBy)[0], s.self)
	}
	m, err := lease.LookupMember(ctx, s.db, target)
	if errors.Is(err, lease.ErrNoSuchMember) {
		return s.notLive(ctx, target)
	}
	if err != nil {
		return apierr.Postgres(err, "look up node %q", target)
	}
	conn, err := s.peers.Conn(m.GRPCAddr)
	if err != nil {
		return apierr.Wrap(apierr.Unavailable, err, "node %q at %s", target, m.GRPCAddr)
	}
	_, callerDeadline := ctx.Deadline()
	if !callerDeadline {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, s.forwardTimeout)
		defer cancel()
	}
	// The caller's credentials go on, so that the target authorizes the caller, not this
	// node (whose own peer token the connection's credentials add); the target's door
	// decides with its own config.
	octx := metadata.AppendToOutgoingContext(ctx, append(auth.ForwardMetadata(ctx), mdForwardedBy, s.self)...)
	var trailer metadata.MD
	start := time.Now()
	err = conn.Invoke(octx, method, req, resp, grpc.Trailer(&trailer), grpc.StaticMethod())
	code := status.Code(err)
	s.forwarded.Add(ctx, 1, metric.WithAttributes(attribute.String("method", method),
		attribute.String("target", target), attribute.String("code", code.String())))
	s.log.DebugContext(ctx, "forwarded admin request", "method", method, "target", target,
		"addr", m.GRPCAddr, "code", code.String(), "elapsed", time.Since(start))
	if err == nil || len(trailer.Get(mdServedBy)) > 0 {
		return err // the target's own answer, unchanged
	}
	// Not the target's answer: what gRPC says of the call (addresses, the transport's
	// words) is logged, what a node that did answer said is told.
	switch code {
	case codes.Unavailable:
		return apierr.Wrap(apierr.Unavailable, err, "node %q at %s is unreachable", target, m.GRPCAddr)
	case codes.DeadlineExceeded:
		if callerDeadline { // the caller's own deadline passed: say so, naming the node
			return apierr.Wrap(apierr.DeadlineExceeded, err, "node %q at %s did not answer within the call's deadline", target, m.GRPCAddr)
		}
		return apierr.Wrap(apierr.Unavailable, err, "node %q at %s did not answer within %v", target, m.GRPCAddr, s.forwardTimeout)
	}
	return err
}

// notLive tells an unknown node (NotFound) from a registered one whose membership has
// expired (Unavailable: it crashed or cannot reach Postgres). Expired rows are kept for a
// lease_ttl after expiry, so a crash is told apart for that long.
func (s *Server) notLive(ctx context.Context, target string) error {
	expires, found, err := lease.MemberExpiry(ctx, s.db, target)
	if err != nil {
		return apierr.Postgres(err, "look up node %q", target)
	}
	if !found {
		return apierr.New(apierr.NotFound, "node %q: no such node (ListNodes shows the live ones)", target)
	}
	return apierr.New(apierr.Unavailable, "node %q is not live: its membership expired at %s (crashed, or cannot reach Postgres)",
		target, expires.UTC().Format(time.RFC3339Nano))
}
