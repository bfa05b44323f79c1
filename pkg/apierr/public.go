package apierr

// What a client is told of an error, the one policy every door renders with:
//   - the public messages of the Mink errors in its chain, outermost first, joined by
//     ": ": an Error's field and message, and the message of a status another Mink node
//     rendered; nothing else of the chain (what fmt.Errorf wrappers, drivers, the
//     network, the OS or Kafka say) is told, and the cause of a DataLossErr never is;
//   - when the chain holds such a cause, or the error is a bug (Internal), the answer
//     names a request id (gRPC and Iceberg in the message, S3 in its RequestId), under
//     which the door logs the whole error;
//   - with no Mink words at all, the kind's name stands for them.

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"strings"
	"unicode/utf8"

	"google.golang.org/grpc/status"
)

// told is what a client is told of an error.
type told struct {
	kind Kind
	msg  string // the public words, truncated, without a request id
	// logged: the message names a request id and the door logs the error under it (a
	// cause not told, or a bug).
	logged bool
	// peer is the status another node rendered, when it is all there is to tell: it is
	// passed on whole (its message names that node's request id, if any).
	peer *status.Status
}

// tell applies the policy to err.
func tell(err error) told {
	k := Classify(err)
	w := words{}
	w.walk(err)
	t := told{kind: k, msg: strings.Join(w.parts, ": "), logged: w.hidden || w.peerLogged || (k == Internal && w.own)}
	if !w.own && !w.hidden && len(w.peers) == 1 {
		t.peer = w.peers[0]
	}
	if t.msg == "" {
		t.msg = k.String()
	}
	t.msg = Truncate(t.msg)
	return t
}

// text is what a door tells: the message, naming id when the error is logged under it.
func (t told) text(id string) string {
	if !t.logged {
		return t.msg
	}
	return t.msg + " (request id " + id + ": the node's log has the cause)"
}

// s3Text is what the S3 door tells: the message, pointing at the log when the error is
// logged under the answer's request id, which S3 names in RequestId, not in the message
// (clients match words and numbers in messages: s3blob takes "301" for a lost bucket).
func (t told) s3Text() string {
	if !t.logged {
		return t.msg
	}
	return t.msg + " (the file server's log has the cause under this answer's RequestId)"
}

// Message is what a client is told of err, without a request id: for answers that carry
// an error's words in a field of their own (a node's status).
func Message(err error) string {
	return tell(err).msg
}

// words gathers the public words of an error's chain.
type words struct {
	parts  []string
	peers  []*status.Status // statuses other nodes rendered
	own    bool             // an Error of this node's was met
	hidden bool             // a cause that is not told was met
	// peerLogged: another node logged a cause it did not tell, under its request id.
	peerLogged bool
}

func (w *words) walk(err error) {
	for err != nil {
		switch e := err.(type) {
		case *Error:
			w.own = true
			if p := e.public(); p != "" {
				w.parts = append(w.parts, p)
			}
			err = e.Err
			continue
		case untold:
			w.hidden = true
			return
		case interface{ GRPCStatus() *status.Status }:
			st := e.GRPCStatus()
			if info := rendered(st); info != nil {
				msg, ok := info.GetMetadata()[metaMessage]
				if !ok {
					msg = st.Message() // a node from before the metadata: its message is its words
				}
				w.parts = append(w.parts, msg)
				w.peers = append(w.peers, st)
				w.peerLogged = w.peerLogged || info.GetMetadata()[metaRequestID] != ""
			} else {
				// gRPC's own status (a call that failed on its way), or a node's that
				// does not render errors: its words may be anything.
				w.hidden = true
			}
			return
		case interface{ Unwrap() []error }:
			for _, c := range e.Unwrap() {
				w.walk(c)
			}
			return
		case interface{ Unwrap() error }:
			err = e.Unwrap()
			continue
		}
		// A cause from outside Mink, but for the context's errors: the kind says all
		// they say.
		if err != context.Canceled && err != context.DeadlineExceeded {
			w.hidden = true
		}
		return
	}
}

// MaxMessage is the longest message a client is told; the rest goes to the log only.
const MaxMessage = 2048

// Truncate cuts a message to MaxMessage bytes (at a rune boundary), saying how much
// was left out: a long chain of causes or a huge bad value must not become a huge answer.
func Truncate(msg string) string {
	if len(msg) <= MaxMessage {
		return msg
	}
	cut := MaxMessage
	for cut > 0 && !utf8.RuneStart(msg[cut]) {
		cut--
	}
	return fmt.Sprintf("%s... (%d bytes more)", msg[:cut], len(msg)-cut)
}

// RequestID is a fresh id naming one request in the logs and in what its client is told,
// at every door: 16 hex digits, never "301" (the S3 library iceberg-go reads through,
// gocloud.dev's s3blob, takes any failed request whose error text holds it, request id
// included, for a missing bucket, and stops retrying).
func RequestID() string {
	for {
		var b [8]byte
		rand.Read(b[:])
		if id := strings.ToUpper(hex.EncodeToString(b[:])); !strings.Contains(id, "301") {
			return id
		}
	}
}
