package vendorhttp

import (
	"bytes"
	"fmt"
	"sync"

	kgzip "github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/zstd"
	"go.opentelemetry.io/collector/config/configcompression"
)

// maxPooledBuffer keeps one giant batch from pinning its buffer in a pool forever.
const maxPooledBuffer = 16 << 20

// Compressor compresses request bodies at the configured level with pooled encoders
// (klauspost/compress: gzip about twice as fast as compress/gzip at the same level and
// ratio; one concurrent zstd encoder). Safe for concurrent use.
type Compressor struct {
	encoding  string // Content-Encoding
	gzipLevel int
	gzips     sync.Pool // *kgzip.Writer
	zstd      *zstd.Encoder
	buffers   sync.Pool // *bytes.Buffer
}

// Levels are an exporter's compression levels for when compression_params.level is 0
// (unset), chosen for its vendor's bodies.
type Levels struct {
	Gzip int
	Zstd zstd.EncoderLevel
}

// NewCompressor returns the compressor for a compression setting, or nil when bodies go
// uncompressed ("" or none). level 0 means the exporter's default (def); any other value
// is used as configured (confighttp validated it: gzip -1..9, zstd any level, mapped onto
// klauspost's four zstd levels).
func NewCompressor(t configcompression.Type, level configcompression.Level, def Levels) (*Compressor, error) {
	switch {
	case !t.IsCompressed():
		return nil, nil
	case t == configcompression.TypeGzip:
		l := int(level)
		if l == 0 {
			l = def.Gzip
		}
		if _, err := kgzip.NewWriterLevel(nil, l); err != nil {
			return nil, fmt.Errorf("gzip level %d: %w", l, err)
		}
		return &Compressor{encoding: "gzip", gzipLevel: l}, nil
	case t == configcompression.TypeZstd:
		l := def.Zstd
		if level != 0 {
			l = zstd.EncoderLevelFromZstd(int(level))
		}
		// A 1 MiB window instead of the level's default (up to 8 MiB): each of the four
		// encoders keeps a history of twice its window, and bodies are JSON whose repeats
		// are near each other, so the larger window bought little ratio for 4× the memory.
		// No content checksum: LangSmith's SDK writes none either (python-zstandard's
		// default), TCP and TLS check the bytes already, and hashing every body took a
		// tenth of the encoder's time.
		enc, err := zstd.NewWriter(nil, zstd.WithEncoderLevel(l), zstd.WithEncoderConcurrency(4), zstd.WithWindowSize(1<<20), zstd.WithEncoderCRC(false))
		if err != nil {
			return nil, fmt.Errorf("zstd encoder: %w", err)
		}
		return &Compressor{encoding: "zstd", zstd: enc}, nil
	}
	return nil, fmt.Errorf("unsupported compression %q", string(t))
}

// Encoding is the Content-Encoding of compressed bodies.
func (c *Compressor) Encoding() string { return c.encoding }

// Compress returns a pooled buffer holding body compressed: the parts given, one after
// the other. Hand it back with Release once the request is done with it (Body does that
// when the transport closes it).
func (c *Compressor) Compress(body ...[]byte) *bytes.Buffer {
	buf := c.Buffer()
	if c.zstd != nil {
		var src []byte
		if len(body) == 1 {
			src = body[0]
		} else {
			joined := c.Buffer()
			defer c.Release(joined)
			for _, p := range body {
				joined.Write(p)
			}
			src = joined.Bytes()
		}
		buf.Write(c.zstd.EncodeAll(src, buf.AvailableBuffer()[:0]))
		return buf
	}
	w, _ := c.gzips.Get().(*kgzip.Writer)
	if w == nil {
		// the level was checked by NewCompressor
		w, _ = kgzip.NewWriterLevel(buf, c.gzipLevel)
	} else {
		w.Reset(buf)
	}
	// writes to a bytes.Buffer cannot fail
	for _, p := range body {
		_, _ = w.Write(p)
	}
	_ = w.Close()
	c.gzips.Put(w)
	return buf
}

// Buffer is an empty pooled buffer.
func (c *Compressor) Buffer() *bytes.Buffer {
	buf, _ := c.buffers.Get().(*bytes.Buffer)
	if buf == nil {
		buf = new(bytes.Buffer)
	}
	buf.Reset()
	return buf
}

// Release hands a buffer from Compress back to the pool.
func (c *Compressor) Release(buf *bytes.Buffer) {
	if buf.Cap() <= maxPooledBuffer {
		c.buffers.Put(buf)
	}
}

// Close releases the zstd encoder's goroutines and memory.
func (c *Compressor) Close() {
	if c != nil && c.zstd != nil {
		_ = c.zstd.Close()
	}
}

// Body is a request body over a pooled buffer, handed back on Close: the transport always
// closes a request body, even on errors, and may still read it after Do returned (an early
// answer such as a 413 before the upload ended), so the buffer goes back only then.
type Body struct {
	*bytes.Reader
	once    sync.Once
	release func()
}

// NewBody reads b and calls release (may be nil) once, when closed.
func NewBody(b []byte, release func()) *Body {
	return &Body{Reader: bytes.NewReader(b), release: release}
}

// Close releases the buffer; later calls do nothing.
func (b *Body) Close() error {
	b.once.Do(func() {
		if b.release != nil {
			b.release()
		}
	})
	return nil
}
