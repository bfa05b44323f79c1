package s3api

import (
	"net/url"
	"strings"
	"unicode/utf8"

	"github.com/minkhq/mink/pkg/apierr"
	"github.com/minkhq/mink/pkg/auth"
)

// Bounds on what an error body echoes of the request: S3 keys are at most 1 KiB; a
// canonical request is the request's signed headers, bounded by the header limit.
const (
	maxEchoKey     = 1024
	maxEchoBucket  = 255
	maxEchoMessage = 2048
	maxEchoSigning = 16 << 10
)

// bounded is e with every element that may echo the request cut to its bound, so an
// error body never repeats a huge key or bucket back.
func bounded(e apierr.S3Error) apierr.S3Error {
	long := e.Key
	e.Key = truncate(e.Key, maxEchoKey)
	e.Resource = truncate(e.Resource, maxEchoKey)
	e.BucketName = truncate(e.BucketName, maxEchoBucket)
	e.ArgumentValue = truncate(e.ArgumentValue, maxEchoKey)
	if len(long) > maxEchoKey {
		e.Message = strings.ReplaceAll(e.Message, long, e.Key)
	}
	e.Message = truncate(e.Message, maxEchoMessage)
	e.AWSAccessKeyID = truncate(e.AWSAccessKeyID, maxEchoKey)
	e.SignatureProvided = truncate(e.SignatureProvided, maxEchoKey)
	e.StringToSign = truncate(e.StringToSign, maxEchoSigning)
	e.CanonicalRequest = truncate(e.CanonicalRequest, maxEchoSigning)
	e.StringToSignBytes, e.CanonicalRequestBytes = hexBytes(e.StringToSign), hexBytes(e.CanonicalRequest)
	return e
}

// hexBytes is s as S3 shows it beside the text: each byte in hex, space-separated.
func hexBytes(s string) string {
	if s == "" {
		return ""
	}
	b := make([]byte, 0, 3*len(s))
	for i := 0; i < len(s); i++ {
		if i > 0 {
			b = append(b, ' ')
		}
		b = append(b, "0123456789abcdef"[s[i]>>4], "0123456789abcdef"[s[i]&15])
	}
	return string(b)
}

// truncate cuts s to at most n bytes, on a character boundary, marking the cut.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	cut := n - len("...")
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "..."
}

// authorized reports whether p may read key: a key names its table by its first two
// segments, "<namespace>/<table>/...". When not, it says why.
func authorized(p *auth.Principal, key string) (string, bool) {
	if p.IsAdmin() {
		return "", true
	}
	ns, rest, _ := strings.Cut(key, "/")
	name, _, _ := strings.Cut(rest, "/")
	switch {
	case ns == "" || name == "":
		return "the key names no table (keys are <namespace>/<table>/...)", false
	case p.CanRead(ns, name):
		return "", true
	case p.Table != "":
		return "these credentials were vended for table " + p.Table + " and read its files only, not " + ns + "." + name + "'s", false
	}
	return "principal " + p.ID + " may not read table " + ns + "." + name, false
}

// subresources are the query parameters that make a request another S3 operation than
// GetObject or HeadObject (or HeadBucket): Mink serves none of them but ?location of the
// bucket (GetBucketLocation). Listing (list-type, prefix, ...) is answered as listing.
var subresources = map[string]bool{
	"accelerate": true, "acl": true, "analytics": true, "attributes": true, "cors": true,
	"delete": true, "encryption": true, "intelligent-tiering": true, "inventory": true,
	"legal-hold": true, "lifecycle": true, "location": true, "logging": true,
	"metadataConfiguration": true, "metadataTable": true, "metrics": true,
	"notification": true, "object-lock": true, "ownershipControls": true, "partNumber": true,
	"policy": true, "policyStatus": true, "publicAccessBlock": true, "renameObject": true,
	"replication": true, "requestPayment": true, "restore": true, "retention": true,
	"select": true, "select-type": true, "session": true, "tagging": true, "torrent": true,
	"uploadId": true, "uploads": true, "versioning": true, "versions": true, "website": true,
}

// subresource is the first subresource q asks for, if any. versionId=null is the one
// version of an object in a bucket without versioning, so it is GetObject.
func subresource(q url.Values) (string, bool) {
	var found []string
	for k := range q {
		if subresources[k] || (k == "versionId" && q.Get(k) != "null") {
			found = append(found, k)
		}
	}
	if len(found) == 0 {
		return "", false
	}
	first := found[0]
	for _, k := range found[1:] {
		first = min(first, k)
	}
	return first, true
}
