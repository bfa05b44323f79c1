package auth

import (
	"context"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	adminv1 "github.com/minkhq/mink/gen/mink/admin/v1"
	filev1 "github.com/minkhq/mink/gen/mink/file/v1"
	"github.com/minkhq/mink/pkg/apierr"
)

// The policy of every method a node serves: the admin API method by method, the file
// service for peers, health and reflection open.
var wantPolicy = map[string]Access{
	"/mink.admin.v1.AdminService/GetStatus":     AccessRead,
	"/mink.admin.v1.AdminService/ListNodes":     AccessRead,
	"/mink.admin.v1.AdminService/ListLeases":    AccessRead,
	"/mink.admin.v1.AdminService/ListTables":    AccessRead,
	"/mink.admin.v1.AdminService/DescribeTable": AccessRead,
	"/mink.admin.v1.AdminService/GetHistory":    AccessRead,
	"/mink.admin.v1.AdminService/DrainNode":     AccessAdmin,
	"/mink.admin.v1.AdminService/UndrainNode":   AccessAdmin,
	"/mink.admin.v1.AdminService/CreateTable":   AccessAdmin,
	"/mink.admin.v1.AdminService/DropTable":     AccessAdmin,
	"/mink.admin.v1.AdminService/AlterTable":    AccessAdmin,
	"/mink.admin.v1.AdminService/CreateTopic":   AccessAdmin,
	"/mink.admin.v1.AdminService/ListTopics":    AccessAdmin,
	"/mink.admin.v1.AdminService/ResetTable":    AccessAdmin,
	"/mink.file.v1.FileService/ReadFile":        AccessPeer,

	"/grpc.health.v1.Health/Check":                                    AccessOpen,
	"/grpc.health.v1.Health/Watch":                                    AccessOpen,
	"/grpc.health.v1.Health/List":                                     AccessOpen,
	"/grpc.reflection.v1.ServerReflection/ServerReflectionInfo":       AccessOpen,
	"/grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo":  AccessOpen,
	"/mink.admin.v1.AdminService/SomethingNew":                        AccessAdmin, // unknown: the strictest a principal has
	"/mink.other.v1.Other/Call":                                       AccessAdmin,
	"/grpc.health.v1.HealthX/Check":                                   AccessAdmin,
	"grpc.health.v1.Health":                                           AccessAdmin,
	"/mink.admin.v1.AdminService/GetStatus/x":                         AccessAdmin,
	"/mink.file.v1.FileService/ReadFileAndSomething":                  AccessPeer,
	"/grpc.health.v1.Health/Check/x":                                  AccessAdmin,
	"/grpc.health.v1.Health/":                                         AccessAdmin,
	"/grpc.reflection.v1.ServerReflection/ServerReflectionInfoFuture": AccessOpen,
}

func TestPolicyOfEveryMethod(t *testing.T) {
	for m, want := range wantPolicy {
		if got := Policy(m); got != want {
			t.Errorf("Policy(%s) = %v, want %v", m, got, want)
		}
	}
	// Every method the generated services have is in the table above: a new method
	// is a decision to make, not a default to inherit unnoticed.
	for _, sd := range []grpc.ServiceDesc{adminv1.AdminService_ServiceDesc, filev1.FileService_ServiceDesc} {
		for _, m := range sd.Methods {
			if _, ok := wantPolicy["/"+sd.ServiceName+"/"+m.MethodName]; !ok {
				t.Errorf("%s/%s has no policy in this test", sd.ServiceName, m.MethodName)
			}
		}
		for _, s := range sd.Streams {
			if _, ok := wantPolicy["/"+sd.ServiceName+"/"+s.StreamName]; !ok {
				t.Errorf("%s/%s has no policy in this test", sd.ServiceName, s.StreamName)
			}
		}
	}
}

// caller is who a test call comes from: its metadata.
type caller struct {
	name string
	md   func(t *testing.T, a *Authority) metadata.MD
}

func bearer(tok string) metadata.MD { return metadata.Pairs(MetadataAuthorization, "Bearer "+tok) }

var callers = []caller{
	{"nobody", func(*testing.T, *Authority) metadata.MD { return nil }},
	{"reader secret", func(*testing.T, *Authority) metadata.MD { return bearer(etlSecret) }},
	{"reader token", func(t *testing.T, a *Authority) metadata.MD {
		p, _ := a.Secret("etl", etlSecret)
		tok, _, err := a.Issue(p)
		if err != nil {
			t.Fatal(err)
		}
		return bearer(tok)
	}},
	{"admin secret", func(*testing.T, *Authority) metadata.MD { return bearer(opsSecret) }},
	{"admin token, lower-case scheme", func(t *testing.T, a *Authority) metadata.MD {
		p, _ := a.Secret("ops", opsSecret)
		tok, _, _ := a.Issue(p)
		return metadata.Pairs(MetadataAuthorization, "bearer "+tok)
	}},
	{"peer", func(t *testing.T, a *Authority) metadata.MD { return peerMD(t, a) }},
	{"reader forwarded by a peer", func(t *testing.T, a *Authority) metadata.MD {
		return metadata.Join(bearer(etlSecret), peerMD(t, a))
	}},
	{"admin forwarded by a peer", func(t *testing.T, a *Authority) metadata.MD {
		return metadata.Join(bearer(opsSecret), peerMD(t, a))
	}},
	{"wrong secret", func(*testing.T, *Authority) metadata.MD { return bearer("not-a-secret-of-anyone") }},
	{"basic", func(*testing.T, *Authority) metadata.MD {
		return metadata.Pairs(MetadataAuthorization, "Basic ZXRsOmV0bC1zZWNyZXQ=")
	}},
	{"peer token as bearer", func(t *testing.T, a *Authority) metadata.MD {
		tok, _ := a.PeerToken("fs-1")
		return bearer(tok)
	}},
	{"expired token", func(t *testing.T, a *Authority) metadata.MD {
		tok := a.state.Load().accessToken("ops", time.Now().Add(-time.Hour))
		return bearer(tok)
	}},
	{"forged peer token", func(t *testing.T, a *Authority) metadata.MD {
		f := testFile()
		f.ClusterSecret = strings.Repeat("z", 40)
		o, _ := New(f)
		return peerMD(t, o)
	}},
	{"secret as peer token", func(*testing.T, *Authority) metadata.MD { return metadata.Pairs(MetadataPeer, opsSecret) }},
}

func peerMD(t *testing.T, a *Authority) metadata.MD {
	m, err := NewPeerCredentials(a, "fs-1").GetRequestMetadata(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return metadata.New(m)
}

// want is the code a caller gets for a method of each access.
var want = map[string]map[Access]codes.Code{
	"nobody":                         {AccessAdmin: codes.Unauthenticated, AccessRead: codes.Unauthenticated, AccessPeer: codes.Unauthenticated, AccessOpen: codes.OK},
	"reader secret":                  {AccessAdmin: codes.PermissionDenied, AccessRead: codes.OK, AccessPeer: codes.PermissionDenied, AccessOpen: codes.OK},
	"reader token":                   {AccessAdmin: codes.PermissionDenied, AccessRead: codes.OK, AccessPeer: codes.PermissionDenied, AccessOpen: codes.OK},
	"admin secret":                   {AccessAdmin: codes.OK, AccessRead: codes.OK, AccessPeer: codes.PermissionDenied, AccessOpen: codes.OK},
	"admin token, lower-case scheme": {AccessAdmin: codes.OK, AccessRead: codes.OK, AccessPeer: codes.PermissionDenied, AccessOpen: codes.OK},
	"peer":                           {AccessAdmin: codes.Unauthenticated, AccessRead: codes.Unauthenticated, AccessPeer: codes.OK, AccessOpen: codes.OK},
	"reader forwarded by a peer":     {AccessAdmin: codes.PermissionDenied, AccessRead: codes.OK, AccessPeer: codes.OK, AccessOpen: codes.OK},
	"admin forwarded by a peer":      {AccessAdmin: codes.OK, AccessRead: codes.OK, AccessPeer: codes.OK, AccessOpen: codes.OK},
	"wrong secret":                   {AccessAdmin: codes.Unauthenticated, AccessRead: codes.Unauthenticated, AccessPeer: codes.PermissionDenied, AccessOpen: codes.OK},
	"basic":                          {AccessAdmin: codes.Unauthenticated, AccessRead: codes.Unauthenticated, AccessPeer: codes.PermissionDenied, AccessOpen: codes.OK},
	"peer token as bearer":           {AccessAdmin: codes.Unauthenticated, AccessRead: codes.Unauthenticated, AccessPeer: codes.PermissionDenied, AccessOpen: codes.OK},
	"expired token":                  {AccessAdmin: codes.Unauthenticated, AccessRead: codes.Unauthenticated, AccessPeer: codes.PermissionDenied, AccessOpen: codes.OK},
	"forged peer token":              {AccessAdmin: codes.Unauthenticated, AccessRead: codes.Unauthenticated, AccessPeer: codes.Unauthenticated, AccessOpen: codes.OK},
	"secret as peer token":           {AccessAdmin: codes.Unauthenticated, AccessRead: codes.Unauthenticated, AccessPeer: codes.Unauthenticated, AccessOpen: codes.OK},
}

// TestAuthorizeEveryMethod: every caller against every method, through the unary
// interceptor (and the stream one for streaming methods), as apierr maps the error.
func TestAuthorizeEveryMethod(t *testing.T) {
	a := quietAuthority(t)
	unary := a.UnaryServerInterceptor()
	stream := a.StreamServerInterceptor()
	for _, c := range callers {
		md := c.md(t, a)
		for m := range wantPolicy {
			need := Policy(m)
			ctx := metadata.NewIncomingContext(context.Background(), md)
			var got *Principal
			var reached bool
			_, err := unary(ctx, nil, &grpc.UnaryServerInfo{FullMethod: m}, func(ctx context.Context, _ any) (any, error) {
				reached, got = true, FromContext(ctx)
				if !EnabledIn(ctx) {
					t.Errorf("%s calls %s: the handler's context does not say auth is on", c.name, m)
				}
				return nil, nil
			})
			code := status.Code(apierr.GRPC(err))
			if code != want[c.name][need] || reached != (code == codes.OK) {
				t.Errorf("%s calls %s (needs %v): %v (reached %v), want %v", c.name, m, need, err, reached, want[c.name][need])
				continue
			}
			if code == codes.OK && need != AccessOpen {
				switch {
				case got == nil:
					t.Errorf("%s calls %s: no principal in the handler's context", c.name, m)
				case need == AccessPeer && !got.Peer:
					t.Errorf("%s calls %s: principal %+v, want the peer", c.name, m, got)
				case need != AccessPeer && (got.Peer || got.ID == ""):
					t.Errorf("%s calls %s: principal %+v, want the bearer's", c.name, m, got)
				}
			}
			// The stream door decides the same, and hands the stream a context with it.
			serr := stream(nil, &fakeStream{ctx: ctx}, &grpc.StreamServerInfo{FullMethod: m}, func(_ any, ss grpc.ServerStream) error {
				if p := FromContext(ss.Context()); need != AccessOpen && p == nil {
					t.Errorf("%s streams %s: no principal in the stream's context", c.name, m)
				}
				return nil
			})
			if status.Code(apierr.GRPC(serr)) != code {
				t.Errorf("%s streams %s: %v, unary said %v", c.name, m, serr, code)
			}
		}
	}
}

type fakeStream struct {
	grpc.ServerStream
	ctx context.Context
}

func (f *fakeStream) Context() context.Context { return f.ctx }

// TestAuthorizeMessages: refusals name what is missing, the method and the role it needs,
// and never quote a secret.
func TestAuthorizeMessages(t *testing.T) {
	a := quietAuthority(t)
	call := func(method string, md metadata.MD) error {
		_, err := a.Authorize(metadata.NewIncomingContext(context.Background(), md), method)
		return apierr.GRPC(err)
	}
	drop := adminv1.AdminService_DropTable_FullMethodName
	read := filev1.FileService_ReadFile_FullMethodName
	for name, c := range map[string]struct {
		err  error
		code codes.Code
		want []string
	}{
		"no token":           {call(drop, nil), codes.Unauthenticated, []string{"AdminService/DropTable", "authorization: Bearer <token>"}},
		"reader drops":       {call(drop, bearer(etlSecret)), codes.PermissionDenied, []string{`"etl"`, "role reader", "mink.admin.v1.AdminService/DropTable", "needs role admin"}},
		"reader drains":      {call(adminv1.AdminService_DrainNode_FullMethodName, bearer(etlSecret)), codes.PermissionDenied, []string{"DrainNode", "needs role admin"}},
		"admin reads files":  {call(read, bearer(opsSecret)), codes.PermissionDenied, []string{"internal service: cluster nodes only"}},
		"nobody reads files": {call(read, nil), codes.Unauthenticated, []string{"internal service: cluster nodes only", MetadataPeer}},
		"bare peer on admin": {call(drop, peerMD(t, a)), codes.Unauthenticated, []string{"principal's credentials", "peer token"}},
		"wrong secret":       {call(drop, bearer("hunter2-hunter2-hunter2")), codes.Unauthenticated, []string{"bearer token", "neither a token"}},
		"two tokens":         {call(drop, metadata.Join(bearer(etlSecret), bearer(opsSecret))), codes.Unauthenticated, []string{"2 authorization values"}},
		"not bearer":         {call(drop, metadata.Pairs(MetadataAuthorization, opsSecret)), codes.Unauthenticated, []string{"not \"Bearer <token>\""}},
		"empty bearer":       {call(drop, metadata.Pairs(MetadataAuthorization, "Bearer ")), codes.Unauthenticated, []string{"no bearer token"}},
		"bad peer token":     {call(read, metadata.Pairs(MetadataPeer, "eyJx.eyJ.sig")), codes.Unauthenticated, []string{"peer token", "does not verify"}},
		"access token as peer": {call(read, func() metadata.MD {
			p, _ := a.Secret("ops", opsSecret)
			tok, _, _ := a.Issue(p)
			return metadata.Pairs(MetadataPeer, tok)
		}()), codes.Unauthenticated, []string{"access token is not accepted"}},
	} {
		st := status.Convert(c.err)
		if st.Code() != c.code {
			t.Errorf("%s: %v, want %v", name, c.err, c.code)
			continue
		}
		for _, w := range c.want {
			if !strings.Contains(st.Message(), w) {
				t.Errorf("%s: message %q does not mention %q", name, st.Message(), w)
			}
		}
		for _, s := range []string{etlSecret, opsSecret, clusterSecret} {
			if strings.Contains(st.Message(), s) {
				t.Errorf("%s: message %q quotes a secret", name, st.Message())
			}
		}
	}
}

// TestAuthOffIsAnonymous: without an auth config every call, the file service
// included, proceeds as Anonymous, whatever it carries.
func TestAuthOffIsAnonymous(t *testing.T) {
	var off *Authority
	for m := range wantPolicy {
		for _, md := range []metadata.MD{nil, bearer("anything"), metadata.Pairs(MetadataPeer, "x")} {
			ctx, err := off.Authorize(metadata.NewIncomingContext(context.Background(), md), m)
			if err != nil || FromContext(ctx) != Anonymous || EnabledIn(ctx) {
				t.Errorf("auth off, %s: %v, principal %+v", m, err, FromContext(ctx))
			}
		}
	}
	if EnabledIn(context.Background()) {
		t.Error("a context that passed no door says auth is on")
	}
}

// TestCheckReadAndForwardMetadata: the table-level rule handlers use, and the
// credentials a forwarding node sends on.
func TestCheckReadAndForwardMetadata(t *testing.T) {
	a := testAuthority(t)
	etl, _ := a.Bearer(etlSecret)
	ops, _ := a.Bearer(opsSecret)
	peer, _ := a.Peer(func() string { tok, _ := a.PeerToken("fs-1"); return tok }())
	for _, c := range []struct {
		p      *Principal
		ns, tb string
		ok     bool
	}{
		{etl, "default", "demo", true}, {etl, "sales", "orders", true}, {etl, "sales", "refunds", false},
		{ops, "any", "thing", true}, {Anonymous, "any", "thing", true}, {peer, "default", "demo", false}, {nil, "default", "demo", false},
	} {
		ctx := context.Background()
		if c.p != nil {
			ctx = WithPrincipal(ctx, c.p)
		}
		err := CheckRead(ctx, c.ns, c.tb)
		if (err == nil) != c.ok || (err != nil && apierr.Classify(err) != apierr.PermissionDenied) {
			t.Errorf("CheckRead(%v, %s.%s) = %v, want ok %v", c.p, c.ns, c.tb, err, c.ok)
		}
	}
	md := metadata.Join(bearer(etlSecret), metadata.Pairs(MetadataPeer, "p", "other", "x"))
	kv := ForwardMetadata(metadata.NewIncomingContext(context.Background(), md))
	if len(kv) != 2 || kv[0] != MetadataAuthorization || kv[1] != "Bearer "+etlSecret {
		t.Errorf("ForwardMetadata = %q, want the caller's authorization only", kv)
	}
	if kv := ForwardMetadata(context.Background()); len(kv) != 0 {
		t.Errorf("ForwardMetadata without metadata = %q", kv)
	}
}

// quietAuthority is testAuthority logging nowhere: the door logs every refusal.
func quietAuthority(t *testing.T) *Authority {
	a := testAuthority(t)
	a.log = slog.New(slog.NewTextHandler(io.Discard, nil))
	return a
}
