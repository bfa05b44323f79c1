package auth

// The gRPC door: every call to a node's gRPC server passes Authorize (through the
// interceptors below, which pkg/node installs), which decides from the method alone what
// the call needs (Policy) and puts who is calling in the context for the handlers.
// Table-level decisions (a reader's patterns) are made where the table is known, with
// CheckRead and Principal.CanRead, which are decided here too.

import (
	"context"
	"strings"

	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"

	adminv1 "github.com/minkhq/mink/gen/mink/admin/v1"
	filev1 "github.com/minkhq/mink/gen/mink/file/v1"
	"github.com/minkhq/mink/pkg/apierr"
)

// MetadataAuthorization is the gRPC metadata key of a principal's credentials:
// "authorization: Bearer <token>", the token an access token this cluster issued
// (POST /v1/oauth/tokens) or a principal's secret.
const MetadataAuthorization = "authorization"

// Access is what a gRPC method needs of its caller.
type Access int

const (
	// AccessAdmin: a principal with role admin. The zero value: a method the policy does
	// not name needs the most a principal can have.
	AccessAdmin Access = iota
	// AccessRead: any principal (reader or admin); table-level calls check the reader's
	// patterns where the table is known.
	AccessRead
	// AccessPeer: a cluster node's peer token (MetadataPeer), never a principal's token.
	AccessPeer
	// AccessOpen: anyone, with or without credentials (health probes, reflection).
	AccessOpen
)

func (a Access) String() string {
	switch a {
	case AccessAdmin:
		return "role admin"
	case AccessRead:
		return "role reader or admin"
	case AccessPeer:
		return "a cluster node's peer token"
	case AccessOpen:
		return "nothing"
	}
	return "unknown"
}

// serviceAccess is the access of every method of a service.
var serviceAccess = map[string]Access{
	"grpc.health.v1.Health":                    AccessOpen,
	"grpc.reflection.v1.ServerReflection":      AccessOpen,
	"grpc.reflection.v1alpha.ServerReflection": AccessOpen,
	filev1.FileService_ServiceDesc.ServiceName: AccessPeer,
}

// methodAccess is the access of single methods; a method of the admin API not named here
// is AccessAdmin.
var methodAccess = map[string]Access{
	adminv1.AdminService_GetStatus_FullMethodName:     AccessRead,
	adminv1.AdminService_ListNodes_FullMethodName:     AccessRead,
	adminv1.AdminService_ListLeases_FullMethodName:    AccessRead,
	adminv1.AdminService_ListTables_FullMethodName:    AccessRead,
	adminv1.AdminService_DescribeTable_FullMethodName: AccessRead,
	adminv1.AdminService_GetHistory_FullMethodName:    AccessRead,
	adminv1.AdminService_DrainNode_FullMethodName:     AccessAdmin,
	adminv1.AdminService_UndrainNode_FullMethodName:   AccessAdmin,
	adminv1.AdminService_CreateTable_FullMethodName:   AccessAdmin,
	adminv1.AdminService_DropTable_FullMethodName:     AccessAdmin,
	adminv1.AdminService_AlterTable_FullMethodName:    AccessAdmin,
	// Topics are not tables: a reader's patterns say nothing of them.
	adminv1.AdminService_CreateTopic_FullMethodName: AccessAdmin,
	adminv1.AdminService_ListTopics_FullMethodName:  AccessAdmin,
	adminv1.AdminService_ResetTable_FullMethodName:  AccessAdmin,
}

// Policy is what the gRPC method fullMethod ("/package.Service/Method") needs.
func Policy(fullMethod string) Access {
	if a, ok := methodAccess[fullMethod]; ok {
		return a
	}
	rest, ok := strings.CutPrefix(fullMethod, "/")
	svc, method, ok2 := strings.Cut(rest, "/")
	if !ok || !ok2 || svc == "" || method == "" || strings.Contains(method, "/") {
		return AccessAdmin // not a gRPC method name
	}
	if a, ok := serviceAccess[svc]; ok {
		return a
	}
	return AccessAdmin
}

// doorKey marks a context that passed a gRPC door, with whether auth was on there.
type doorKey struct{}

// EnabledIn reports whether the door ctx passed had auth on (false also when ctx passed
// no door). GetStatus reports it.
func EnabledIn(ctx context.Context) bool {
	on, _ := ctx.Value(doorKey{}).(bool)
	return on
}

// Authorize is the door of a gRPC call of fullMethod: it returns ctx carrying the caller
// (WithPrincipal) and whether auth is on (EnabledIn), or an Unauthenticated error naming
// the credentials missing or wrong, or a PermissionDenied one naming the method and what
// it needs. With auth off every call proceeds as Anonymous.
func (a *Authority) Authorize(ctx context.Context, fullMethod string) (context.Context, error) {
	if a == nil {
		return WithPrincipal(context.WithValue(ctx, doorKey{}, false), Anonymous), nil
	}
	ctx = context.WithValue(ctx, doorKey{}, true)
	md, _ := metadata.FromIncomingContext(ctx)
	need := Policy(fullMethod)
	switch need {
	case AccessOpen:
		return ctx, nil
	case AccessPeer:
		p, err := a.peerOf(md, fullMethod)
		if err != nil {
			a.refused(fullMethod, "", err)
			return nil, err
		}
		return WithPrincipal(ctx, p), nil
	}
	p, err := a.bearerOf(md, fullMethod)
	if err != nil {
		a.refused(fullMethod, "", err)
		return nil, err
	}
	if err := p.may(fullMethod, need); err != nil {
		a.refused(fullMethod, p.ID, err)
		return nil, err
	}
	return WithPrincipal(ctx, p), nil
}

// may is nil when p may call a method needing need.
func (p *Principal) may(fullMethod string, need Access) error {
	switch {
	case need == AccessRead && (p.Role == RoleReader || p.Role == RoleAdmin) && !p.Peer && p.Table == "":
		return nil
	case need == AccessAdmin && p.IsAdmin():
		return nil
	}
	return apierr.New(apierr.PermissionDenied, "principal %q (role %s) may not call %s: it needs %s",
		p.ID, p.Role, strings.TrimPrefix(fullMethod, "/"), need)
}

// bearerOf is the principal of md's "authorization: Bearer" credentials.
func (a *Authority) bearerOf(md metadata.MD, fullMethod string) (*Principal, error) {
	method := strings.TrimPrefix(fullMethod, "/")
	vals := md.Get(MetadataAuthorization)
	switch {
	case len(vals) == 0 && len(md.Get(MetadataPeer)) > 0:
		return nil, unauthenticated("%s needs a principal's credentials (\"authorization: Bearer <token>\" metadata); a node's peer token (%s) is not one", method, MetadataPeer)
	case len(vals) == 0:
		return nil, unauthenticated("%s needs credentials: send \"authorization: Bearer <token>\" metadata, the token an access token (POST /v1/oauth/tokens) or a principal's secret", method)
	case len(vals) > 1:
		return nil, unauthenticated("%s: %d authorization values: send one", method, len(vals))
	}
	scheme, token, _ := strings.Cut(strings.TrimSpace(vals[0]), " ")
	if !strings.EqualFold(scheme, "Bearer") {
		return nil, unauthenticated("%s: the authorization metadata is not \"Bearer <token>\"", method)
	}
	token = strings.TrimSpace(token)
	if token == "" {
		return nil, unauthenticated("%s: the authorization metadata has no bearer token", method)
	}
	p, err := a.Bearer(token)
	if err != nil {
		return nil, apierr.Wrap(apierr.Unauthenticated, err, "%s: bearer token", method)
	}
	return p, nil
}

// peerOf is the node of md's peer token: the only credential the node-to-node services
// take.
func (a *Authority) peerOf(md metadata.MD, fullMethod string) (*Principal, error) {
	vals := md.Get(MetadataPeer)
	if len(vals) == 0 {
		if len(md.Get(MetadataAuthorization)) > 0 {
			return nil, apierr.New(apierr.PermissionDenied, "%s is an internal service: cluster nodes only", strings.TrimPrefix(fullMethod, "/"))
		}
		return nil, unauthenticated("%s is an internal service: cluster nodes only, with a peer token (%s metadata)", strings.TrimPrefix(fullMethod, "/"), MetadataPeer)
	}
	if len(vals) > 1 {
		return nil, unauthenticated("%s: %d peer tokens: send one", strings.TrimPrefix(fullMethod, "/"), len(vals))
	}
	p, err := a.Peer(vals[0])
	if err != nil {
		return nil, apierr.Wrap(apierr.Unauthenticated, err, "%s: peer token", strings.TrimPrefix(fullMethod, "/"))
	}
	return p, nil
}

// refused logs a call the door turned away: permission denials (a known principal) at
// info, failed credentials at debug (probes and scanners make many).
func (a *Authority) refused(fullMethod, principal string, err error) {
	if apierr.Classify(err) == apierr.PermissionDenied {
		a.log.Info("gRPC call refused", "method", fullMethod, "principal", principal, "error", err)
		return
	}
	a.log.Debug("gRPC call unauthenticated", "method", fullMethod, "error", err)
}

// UnaryServerInterceptor is the door of unary calls (Authorize). A nil Authority lets
// every call in as Anonymous.
func (a *Authority) UnaryServerInterceptor() grpc.UnaryServerInterceptor {
	return func(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
		ctx, err := a.Authorize(ctx, info.FullMethod)
		if err != nil {
			return nil, err
		}
		return h(ctx, req)
	}
}

// StreamServerInterceptor is the door of streams (Authorize).
func (a *Authority) StreamServerInterceptor() grpc.StreamServerInterceptor {
	return func(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, h grpc.StreamHandler) error {
		ctx, err := a.Authorize(ss.Context(), info.FullMethod)
		if err != nil {
			return err
		}
		return h(srv, &doorStream{ServerStream: ss, ctx: ctx})
	}
}

// doorStream is a stream whose context carries what the door found.
type doorStream struct {
	grpc.ServerStream
	ctx context.Context
}

func (s *doorStream) Context() context.Context { return s.ctx }

// CheckRead is nil when ctx's principal may read table ns.name (admin API calls naming a
// table: DescribeTable), else a PermissionDenied error naming the principal and table.
func CheckRead(ctx context.Context, ns, name string) error {
	p := FromContext(ctx)
	if p.CanRead(ns, name) {
		return nil
	}
	if p == nil {
		return apierr.New(apierr.PermissionDenied, "table %s.%s: the request carries no principal", ns, name)
	}
	return apierr.New(apierr.PermissionDenied, "principal %q may not read table %s.%s: it is outside the principal's table patterns", p.ID, ns, name)
}

// ForwardMetadata is the caller's credentials in ctx's incoming metadata, as pairs for
// metadata.AppendToOutgoingContext: what a node forwarding a call sends on, so that the
// target authorizes the original caller (beside the forwarding node's own peer token,
// which its connection's PeerCredentials add).
func ForwardMetadata(ctx context.Context) []string {
	md, _ := metadata.FromIncomingContext(ctx)
	var kv []string
	for _, v := range md.Get(MetadataAuthorization) {
		kv = append(kv, MetadataAuthorization, v)
	}
	return kv
}
