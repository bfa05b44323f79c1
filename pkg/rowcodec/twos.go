package rowcodec

// MinimalTwos returns b, a big-endian two's-complement number (a decimal's unscaled
// value as Value.Bytes holds it), without the leading bytes that only repeat its sign:
// the fewest bytes that hold it, the form Iceberg hashes and bounds decimals in. It
// aliases b.
func MinimalTwos(b []byte) []byte {
	for len(b) > 1 && (b[0] == 0 && b[1]&0x80 == 0 || b[0] == 0xff && b[1]&0x80 != 0) {
		b = b[1:]
	}
	return b
}
