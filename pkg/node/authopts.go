package node

import (
	"context"

	"google.golang.org/grpc"

	"github.com/minkhq/mink/pkg/auth"
)

// authUnaryInterceptor checks every unary call's credentials against the auth config
// (auth.Authority.Authorize: the policy of every method is pkg/auth's) and hands the
// caller to the handlers in the context. A nil Authority lets every call in as
// auth.Anonymous.
func authUnaryInterceptor(a *auth.Authority) grpc.UnaryServerInterceptor {
	return a.UnaryServerInterceptor()
}

// authStreamInterceptor is authUnaryInterceptor for streams (the file service's reads).
func authStreamInterceptor(a *auth.Authority) grpc.StreamServerInterceptor {
	return a.StreamServerInterceptor()
}

// peerDialOptions make calls to other nodes carry this node's peer token (and TLS).
func peerDialOptions(a *auth.Authority, nodeID string, t *transport) []grpc.DialOption {
	opts := t.dialOptions()
	if a != nil {
		opts = append(opts, grpc.WithPerRPCCredentials(auth.NewPeerCredentials(a, nodeID)))
	}
	return opts
}

// chainUnary runs outer around inner around the handler: the gRPC server's door, and the
// console gateway's, which calls the same handlers in process.
func chainUnary(outer, inner grpc.UnaryServerInterceptor) grpc.UnaryServerInterceptor {
	return func(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
		return outer(ctx, req, info, func(ctx context.Context, req any) (any, error) { return inner(ctx, req, info, h) })
	}
}
