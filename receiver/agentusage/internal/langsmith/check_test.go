package langsmith

import "testing"

// specialIn finds every byte that is not plain, at every position of a word, and
// raises no false alarm on a word of plain bytes around it.
func TestSpecialInExhaustiveBytes(t *testing.T) {
	for c := 0; c < 256; c++ {
		for pos := 0; pos < 8; pos++ {
			for _, fill := range []byte{'a', ' ', '~', '0'} {
				var b [8]byte
				for i := range b {
					b[i] = fill
				}
				b[pos] = byte(c)
				x := uint64(0)
				for i := 7; i >= 0; i-- {
					x = x<<8 | uint64(b[i])
				}
				if want := !plainByte[c]; want && !specialIn(x) {
					t.Fatalf("byte %#x at %d missed", c, pos)
				}
				if plainByte[c] && specialIn(x) {
					t.Errorf("false alarm %#x at %d fill %q", c, pos, fill)
				}
			}
		}
	}
}
