package files

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/minkhq/mink/pkg/apierr"
)

// MaxKeyLen is S3's limit on a key's length in bytes.
const MaxKeyLen = 1024

// ValidKey checks a key before anything looks it up: a relative slash-separated path of
// non-empty segments, none "." or "..", in valid UTF-8 without control characters or
// backslashes. Keys the writer names always pass; anything else (path traversal above
// all) is refused as InvalidArgument rather than looked up.
func ValidKey(key string) error {
	bad := func(why string) error { return apierr.Invalid("key", "%q is not a valid key: %s", key, why) }
	switch {
	case key == "":
		return bad("empty")
	case len(key) > MaxKeyLen:
		return apierr.Invalid("key", "key of %d bytes is longer than %d", len(key), MaxKeyLen)
	case !utf8.ValidString(key):
		return bad("not UTF-8")
	case strings.HasPrefix(key, "/"):
		return bad("starts with /")
	}
	for _, r := range key {
		if r < 0x20 || r == 0x7f || r == '\\' {
			return bad("control character or backslash")
		}
	}
	for seg := range strings.SplitSeq(key, "/") {
		switch seg {
		case "":
			return bad("empty path segment")
		case ".", "..":
			return bad("dot segment")
		}
	}
	return nil
}

// Range is a byte range as an HTTP Range header gives it. A nil *Range is the whole file.
type Range struct {
	First    int64 // first byte; ignored for a suffix range
	Last     int64 // last byte, inclusive; -1: to the end of the file
	IsSuffix bool  // the last Suffix bytes
	Suffix   int64
}

// String is the range in Range header form.
func (r *Range) String() string {
	switch {
	case r == nil:
		return "whole file"
	case r.IsSuffix:
		return "bytes=-" + strconv.FormatInt(r.Suffix, 10)
	case r.Last < 0:
		return "bytes=" + strconv.FormatInt(r.First, 10) + "-"
	}
	return fmt.Sprintf("bytes=%d-%d", r.First, r.Last)
}

// Resolve turns r into an offset and length within a file of size bytes, as HTTP does: a
// last byte past the end is clamped, a suffix longer than the file is the whole file;
// a range that starts at or past the end (or an empty suffix) is not satisfiable, an
// error that carries the size for the 416's Content-Range.
func (r *Range) Resolve(size int64) (off, n int64, err error) {
	if r == nil {
		return 0, size, nil
	}
	if r.IsSuffix {
		if r.Suffix <= 0 || size == 0 {
			return 0, 0, apierr.RangeErr(size, "range %s is not satisfiable: the file has %d bytes", r, size)
		}
		n = min(r.Suffix, size)
		return size - n, n, nil
	}
	if r.First < 0 || r.Last >= 0 && r.Last < r.First {
		return 0, 0, apierr.RangeErr(size, "range %s is not a valid range", r)
	}
	if r.First >= size {
		return 0, 0, apierr.RangeErr(size, "range %s is not satisfiable: the file has %d bytes", r, size)
	}
	last := size - 1
	if r.Last >= 0 && r.Last < last {
		last = r.Last
	}
	return r.First, last - r.First + 1, nil
}

// ParseRange reads an HTTP Range header as RFC 9110 and S3 do: one byte range
// ("bytes=a-b", "bytes=a-", "bytes=-n") is that range; anything else (no header, another
// unit, several ranges, a range that does not parse or ends before it starts) is nil,
// the whole file, since a server ignores a Range header it does not take. Whether the
// range is satisfiable is Resolve's to say, once the size is known. Numbers too large
// for an int64 are as large as an int64: a first byte beyond any file, or a suffix
// longer than it.
func ParseRange(h string) *Range {
	unit, spec, ok := strings.Cut(h, "=")
	if !ok || !strings.EqualFold(unit, "bytes") {
		return nil
	}
	var one string
	for part := range strings.SplitSeq(spec, ",") {
		// A list may have empty elements (RFC 9110 section 5.6.1); more than one range
		// is served whole.
		if part = strings.Trim(part, " \t"); part == "" {
			continue
		}
		if one != "" {
			return nil
		}
		one = part
	}
	first, last, ok := strings.Cut(one, "-")
	if !ok {
		return nil
	}
	num := func(s string) (int64, bool) {
		if s == "" || strings.TrimLeft(s, "0123456789") != "" {
			return 0, false
		}
		v, err := strconv.ParseInt(s, 10, 64)
		if err != nil { // only digits: out of range
			v = math.MaxInt64
		}
		return v, true
	}
	if first == "" {
		n, ok := num(last)
		if !ok {
			return nil
		}
		return &Range{IsSuffix: true, Suffix: n}
	}
	f, ok := num(first)
	if !ok {
		return nil
	}
	if last == "" {
		return &Range{First: f, Last: -1}
	}
	l, ok := num(last)
	if !ok || l < f {
		return nil
	}
	return &Range{First: f, Last: l}
}
