package main

import (
	"context"
	"fmt"

	"google.golang.org/grpc"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
)

// health is `minkctl health`: the dialed node's grpc.health.v1 answer, which needs no
// credentials (auth leaves health open, for probes), so a container health check works
// with auth on and no secret in the check. Exit 0 when SERVING; 1 otherwise (NOT_SERVING
// until the node has registered, and again once it is stopping). It dials as every
// command does (the --tls flags).
func (c *cli) health(ctx context.Context, _ []string, _ any) error {
	opts, err := c.dialOptions()
	if err != nil {
		return err
	}
	conn, err := grpc.NewClient(c.addr, opts...)
	if err != nil {
		return usageError{fmt.Sprintf("--addr %q: %v", c.addr, err)}
	}
	defer conn.Close()
	resp, err := healthpb.NewHealthClient(conn).Check(ctx, &healthpb.HealthCheckRequest{})
	if err != nil {
		return err
	}
	if st := resp.GetStatus(); st != healthpb.HealthCheckResponse_SERVING {
		return fmt.Errorf("%s is %s", c.addr, st)
	}
	fmt.Fprintln(c.stdout, resp.GetStatus())
	return nil
}
