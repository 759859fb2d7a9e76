package vendorhttp

import (
	"bytes"
	"compress/gzip"
	"io"
	"testing"

	"github.com/klauspost/compress/zstd"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/config/configcompression"
)

func TestCompressorHonoursTheLevel(t *testing.T) {
	body := bytes.Repeat([]byte(`{"name":"chat gpt-4o","usage":{"input_tokens":1200}} `), 2000)
	c, err := NewCompressor("none", 0, Levels{})
	require.NoError(t, err)
	assert.Nil(t, c)

	size := map[int]int{}
	for _, level := range []configcompression.Level{1, 9, 0} {
		c, err := NewCompressor(configcompression.TypeGzip, level, Levels{Gzip: 5})
		require.NoError(t, err)
		assert.Equal(t, "gzip", c.Encoding())
		buf := c.Compress(body)
		// the gzip header's XFL byte: 4 = fastest (level 1), 2 = best (level 9), 0 otherwise
		size[int(level)] = buf.Len()
		xfl := buf.Bytes()[8]
		switch level {
		case 1:
			assert.Equal(t, byte(4), xfl)
		case 9:
			assert.Equal(t, byte(2), xfl)
		case 0:
			assert.Equal(t, byte(0), xfl, "level 0 is the exporter's default, 5 here")
		}
		zr, err := gzip.NewReader(bytes.NewReader(buf.Bytes()))
		require.NoError(t, err)
		out, err := io.ReadAll(zr)
		require.NoError(t, err)
		assert.Equal(t, body, out)
		c.Release(buf)
	}
	assert.Less(t, size[9], size[1], "level 9 compresses harder than level 1")

	_, err = NewCompressor(configcompression.TypeGzip, 42, Levels{})
	assert.Error(t, err)

	z, err := NewCompressor(configcompression.TypeZstd, 11, Levels{Zstd: zstd.SpeedFastest})
	require.NoError(t, err)
	defer z.Close()
	assert.Equal(t, "zstd", z.Encoding())
	buf := z.Compress(body)
	dec, err := zstd.NewReader(nil)
	require.NoError(t, err)
	defer dec.Close()
	out, err := dec.DecodeAll(buf.Bytes(), nil)
	require.NoError(t, err)
	assert.Equal(t, body, out)
	// the frame carries no content checksum (Frame_Header_Descriptor bit 2, after the
	// 4-byte magic number), as LangSmith's SDK writes it
	require.Greater(t, buf.Len(), 4)
	assert.Zero(t, buf.Bytes()[4]&0x04, "content checksum flag")
	// a higher level must not be ignored: it compresses at least as well as the fastest
	fast, err := NewCompressor(configcompression.TypeZstd, 1, Levels{})
	require.NoError(t, err)
	defer fast.Close()
	assert.LessOrEqual(t, buf.Len(), fast.Compress(body).Len())
}

// A body given in parts is compressed as the parts one after the other.
func TestCompressorTakesParts(t *testing.T) {
	parts := [][]byte{[]byte(`{"a":1}`), bytes.Repeat([]byte("b"), 5000), []byte(`{"c":3}`)}
	want := bytes.Join(parts, nil)
	g, err := NewCompressor(configcompression.TypeGzip, 0, Levels{Gzip: 5})
	require.NoError(t, err)
	buf := g.Compress(parts...)
	zr, err := gzip.NewReader(bytes.NewReader(buf.Bytes()))
	require.NoError(t, err)
	out, err := io.ReadAll(zr)
	require.NoError(t, err)
	assert.Equal(t, want, out)

	z, err := NewCompressor(configcompression.TypeZstd, 0, Levels{Zstd: zstd.SpeedFastest})
	require.NoError(t, err)
	defer z.Close()
	dec, err := zstd.NewReader(nil)
	require.NoError(t, err)
	defer dec.Close()
	out, err = dec.DecodeAll(z.Compress(parts...).Bytes(), nil)
	require.NoError(t, err)
	assert.Equal(t, want, out)
}

func TestBodyReleasesOnce(t *testing.T) {
	n := 0
	b := NewBody([]byte("abc"), func() { n++ })
	got, err := io.ReadAll(b)
	require.NoError(t, err)
	assert.Equal(t, "abc", string(got))
	require.NoError(t, b.Close())
	require.NoError(t, b.Close())
	assert.Equal(t, 1, n)
}
