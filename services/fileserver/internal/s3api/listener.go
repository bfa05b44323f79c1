package s3api

import (
	"bytes"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"

	"github.com/minkhq/mink/pkg/apierr"
)

// Listener wraps the S3 API's listener so that the requests net/http refuses before any
// handler runs — a request line it cannot parse, GET /mink/%ZZ (a bad percent-escape)
// above all — are answered with S3 XML errors, as S3 does, rather than net/http's plain
// text "400 Bad Request". net/http has no hook for them: it writes its answer straight
// to the connection and closes it, so the connection recognizes that answer and writes
// the XML one instead. Nothing else written passes through changed, and a connection
// still hands net/http the TCP connection's ReadFrom (sendfile) and CloseWrite.
//
// It must see net/http's plaintext: with TLS it goes above the TLS listener
// (httplimit.Limits.ServeAbove), never below it, where it would see ciphertext only.
func Listener(l net.Listener, log *slog.Logger) net.Listener {
	if log == nil {
		log = slog.Default()
	}
	return &listener{Listener: l, log: log}
}

type listener struct {
	net.Listener
	log *slog.Logger
}

func (l *listener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return &conn{Conn: c, log: l.log}, nil
}

// lastReadKeep is how much of the last read a connection keeps, to find the request
// line net/http refused in it.
const lastReadKeep = 2048

type conn struct {
	net.Conn
	log *slog.Logger

	mu   sync.Mutex
	last []byte // the start of the last read
}

func (c *conn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	if n > 0 {
		c.mu.Lock()
		c.last = append(c.last[:0], p[:min(n, lastReadKeep)]...)
		c.mu.Unlock()
	}
	return n, err
}

// ReadFrom keeps net/http's sendfile path: it looks for an io.ReaderFrom on the
// connection it was given.
func (c *conn) ReadFrom(r io.Reader) (int64, error) {
	if rf, ok := c.Conn.(io.ReaderFrom); ok {
		return rf.ReadFrom(r)
	}
	return io.Copy(c.Conn, r)
}

// CloseWrite keeps net/http's graceful close of a connection it refused a request on.
func (c *conn) CloseWrite() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return nil
}

// netHTTPErrorHeaders is what net/http's own answers to unparsable requests carry
// between their status line and their text (net/http's server.go).
const netHTTPErrorHeaders = "\r\nContent-Type: text/plain; charset=utf-8\r\nConnection: close\r\n\r\n"

func (c *conn) Write(p []byte) (int, error) {
	if status, text, ok := netHTTPError(p); ok {
		c.mu.Lock()
		last := string(c.last)
		c.mu.Unlock()
		if _, err := c.Conn.Write(c.s3Answer(status, text, last)); err != nil {
			return 0, err
		}
		return len(p), nil
	}
	return c.Conn.Write(p)
}

// netHTTPError recognizes one of net/http's answers to a request it could not parse, as
// it writes them, in one piece: "HTTP/1.1 <code> <reason>[: detail]" + the headers
// above + the same status text again. An answer a handler writes goes through net/http's
// response writer, whose headers are in another order and include Date.
func netHTTPError(p []byte) (status int, text string, ok bool) {
	if len(p) > 1024 { // net/http's texts are short: a write this long is something else
		return 0, "", false
	}
	rest, found := bytes.CutPrefix(p, []byte("HTTP/1.1 "))
	if !found || len(rest) < 4 || rest[3] != ' ' {
		return 0, "", false
	}
	head, body, found := bytes.Cut(rest, []byte(netHTTPErrorHeaders))
	if !found {
		return 0, "", false
	}
	code, err := strconv.Atoi(string(head[:3]))
	if err != nil || code < 400 || code > 599 {
		return 0, "", false
	}
	// The whole write is the answer, and its text repeats its status line (or, for a
	// transfer coding net/http does not know, says so): no write of a response body
	// is that, since a body ends with the file's own last bytes.
	if !bytes.Equal(head, body) && !(code == http.StatusNotImplemented && string(body) == "Unsupported transfer encoding") {
		return 0, "", false
	}
	return code, string(head[4:]), true
}

// s3Answer is the XML answer that replaces net/http's (status, text); last is the
// start of what was read last, where the refused request line is.
func (c *conn) s3Answer(status int, text, last string) []byte {
	id := apierr.RequestID()
	code, msg := "InvalidRequest", "The request is malformed: "+strings.TrimPrefix(text, http.StatusText(status)+": ")
	switch {
	case status == http.StatusBadRequest && badRequestURI(last):
		code, msg = "InvalidURI", "Couldn't parse the specified URI."
	case status == http.StatusRequestHeaderFieldsTooLarge:
		status, code, msg = http.StatusBadRequest, "RequestHeaderSectionTooLarge",
			"Your request header section exceeds the maximum allowed size."
	case status == http.StatusNotImplemented:
		code, msg = "NotImplemented", "A header you provided implies functionality that is not implemented (Transfer-Encoding)."
	case text == http.StatusText(status):
		msg = "The request is malformed."
	}
	e := apierr.S3(apierr.S3Err(apierr.InvalidArgument, status, code, "%s", msg), id)
	c.log.Debug("s3 request refused before its handler", "request_id", id, "code", e.Code, "remote_addr", c.RemoteAddr().String())
	body := e.XML()
	var b bytes.Buffer
	b.WriteString("HTTP/1.1 " + strconv.Itoa(e.Status) + " " + http.StatusText(e.Status) + "\r\n")
	b.WriteString("Content-Type: application/xml\r\nConnection: close\r\nServer: Mink\r\n")
	b.WriteString("X-Amz-Request-Id: " + id + "\r\nX-Mink-Error-Code: " + e.Code + "\r\n")
	b.WriteString("Content-Length: " + strconv.Itoa(len(body)) + "\r\n\r\n")
	b.Write(body)
	return b.Bytes()
}

// badRequestURI reports whether data holds a request line whose target does not parse
// as a request URI (net/http's reason to refuse it).
func badRequestURI(data string) bool {
	for line := range strings.SplitSeq(data, "\n") {
		method, rest, ok := strings.Cut(strings.TrimSuffix(line, "\r"), " ")
		if !ok || method == "" || strings.ToUpper(method) != method {
			continue
		}
		target, proto, ok := strings.Cut(rest, " ")
		if !ok || !strings.HasPrefix(proto, "HTTP/") {
			continue
		}
		if _, err := url.ParseRequestURI(target); err != nil {
			return true
		}
	}
	return false
}
