package auth

import (
	"context"
	"errors"
	"path"
	"strings"
	"sync"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

// Token kinds: what a token is good for.
const (
	kindAccess = "access" // a principal's: the catalog, S3 through the catalog, the admin API
	kindPeer   = "peer"   // a node's: node-to-node services only
)

const (
	issuer = "mink"
	// PeerTokenTTL is how long a node's token lasts; nodes make a new one before.
	PeerTokenTTL = 5 * time.Minute
	// leeway absorbs clock differences between the node that signed and the one that
	// verifies.
	leeway = 30 * time.Second
)

type claims struct {
	Kind string `json:"kind"`
	// Gen is the generation of the principal's secret the token was issued under
	// (state.generation); access tokens only.
	Gen string `json:"gen,omitempty"`
	jwt.RegisteredClaims
}

func looksLikeJWT(s string) bool {
	return strings.HasPrefix(s, "eyJ") && strings.Count(s, ".") == 2
}

// Issue is a signed access token for p, lasting the config's token TTL, bound to p's
// secret as it is now: the OAuth2 client-credentials grant's answer. A token never
// outlives the credential p proved (p.Expires): a token cannot renew itself. It is
// refused when p's secret changed since p was checked.
func (a *Authority) Issue(p *Principal) (token string, ttl time.Duration, err error) {
	if a == nil {
		return "", 0, errors.New("auth: off")
	}
	s := a.state.Load()
	pc, err := s.current(p)
	if err != nil {
		return "", 0, err
	}
	now := time.Now()
	exp := now.Add(time.Duration(s.file.TokenTTL))
	if !p.Expires.IsZero() && p.Expires.Before(exp) {
		exp = p.Expires
	}
	token, err = s.sign(kindAccess, p.ID, s.generation(0, pc), now, exp)
	return token, exp.Sub(now), err
}

func (s *state) sign(kind, subject, gen string, now, exp time.Time) (string, error) {
	t := jwt.NewWithClaims(jwt.SigningMethodHS256, claims{Kind: kind, Gen: gen, RegisteredClaims: jwt.RegisteredClaims{
		Issuer: issuer, Subject: subject, IssuedAt: jwt.NewNumericDate(now), ExpiresAt: jwt.NewNumericDate(exp),
	}})
	t.Header["kid"] = keyID(s.tokenKey)
	return t.SignedString(s.tokenKey)
}

// verifyToken checks a token's signature (with the current or a previous cluster
// secret), expiry and kind, finds its principal in the config in force, and for an
// access token checks that the principal's secret is still the one it was issued under.
func (s *state) verifyToken(token, kind string) (*Principal, error) {
	var c claims
	signedWith := -1
	_, err := jwt.ParseWithClaims(token, &c, func(t *jwt.Token) (any, error) {
		kid, _ := t.Header["kid"].(string)
		for i, k := range s.verifyKeys {
			if keyID(k) == kid {
				signedWith = i
				return k, nil
			}
		}
		return nil, errNoKey
	}, jwt.WithValidMethods([]string{jwt.SigningMethodHS256.Alg()}), jwt.WithIssuer(issuer),
		jwt.WithExpirationRequired(), jwt.WithLeeway(leeway))
	switch {
	case errors.Is(err, jwt.ErrTokenExpired):
		return nil, unauthenticated("the token has expired: get a new one (POST /v1/oauth/tokens)")
	case errors.Is(err, errNoKey):
		return nil, unauthenticated("the token was not signed by this cluster (or with a cluster secret no longer in the auth config)")
	case err != nil:
		return nil, unauthenticated("the token does not verify")
	}
	if c.Kind != kind {
		return nil, unauthenticated("a %s token is not accepted here", c.Kind)
	}
	exp := c.ExpiresAt.Time
	if kind == kindPeer {
		node, ok := strings.CutPrefix(c.Subject, "node:")
		if !ok || node == "" {
			return nil, unauthenticated("the peer token names no node")
		}
		return &Principal{ID: c.Subject, Peer: true, Expires: exp}, nil
	}
	p, ok := s.principal(c.Subject)
	if !ok {
		return nil, unauthenticated("principal %q is not in the auth config", c.Subject)
	}
	if !s.sameGeneration(signedWith, p.checked, c.Gen) {
		return nil, unauthenticated("the token was issued before principal %q's secret changed: get a new one with the current secret (POST /v1/oauth/tokens)", c.Subject)
	}
	p.Expires = exp
	return p, nil
}

// PeerToken is a token for node nodeID to call other nodes' node-to-node services,
// valid for PeerTokenTTL.
func (a *Authority) PeerToken(nodeID string) (string, error) {
	if a == nil {
		return "", errors.New("auth: off")
	}
	now := time.Now()
	return a.state.Load().sign(kindPeer, "node:"+nodeID, "", now, now.Add(PeerTokenTTL))
}

// Peer verifies a peer token.
func (a *Authority) Peer(token string) (*Principal, error) {
	if a == nil {
		return Anonymous, nil
	}
	if token == "" {
		return nil, unauthenticated("no peer token")
	}
	return a.state.Load().verifyToken(token, kindPeer)
}

// PeerCredentials are gRPC per-RPC credentials that send a node's peer token in the
// MetadataPeer header, made anew before the last one expires. A nil Authority sends
// nothing.
type PeerCredentials struct {
	a      *Authority
	nodeID string
	mu     sync.Mutex
	token  string
	until  time.Time
}

// MetadataPeer is the gRPC metadata key of peer tokens. It is not "authorization", so
// a forwarded admin request carries both: the node's (to be let in) and its caller's
// (to be authorized).
const MetadataPeer = "mink-peer"

// NewPeerCredentials makes the per-RPC credentials of node nodeID.
func NewPeerCredentials(a *Authority, nodeID string) *PeerCredentials {
	return &PeerCredentials{a: a, nodeID: nodeID}
}

// GetRequestMetadata implements credentials.PerRPCCredentials.
func (c *PeerCredentials) GetRequestMetadata(context.Context, ...string) (map[string]string, error) {
	if c.a == nil {
		return nil, nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.token == "" || time.Until(c.until) < PeerTokenTTL/2 {
		t, err := c.a.PeerToken(c.nodeID)
		if err != nil {
			return nil, err
		}
		c.token, c.until = t, time.Now().Add(PeerTokenTTL)
	}
	return map[string]string{MetadataPeer: c.token}, nil
}

// RequireTransportSecurity implements credentials.PerRPCCredentials: peers may talk in
// plaintext inside the cluster's network when TLS is not configured.
func (c *PeerCredentials) RequireTransportSecurity() bool { return false }

// cutTable splits "namespace.table".
func cutTable(s string) (ns, name string, ok bool) { return strings.Cut(s, ".") }

func matchGlob(pattern, s string) (bool, error) { return path.Match(pattern, s) }
