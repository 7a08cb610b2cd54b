package openai

import (
	"bytes"
	"errors"
	"io"
	"sync"
)

// maxEvent caps the data of one server-sent event. A tool call's arguments
// can be long, but an answer is capped at maxWholeBody anyway.
const maxEvent = 16 << 20

// errEventTooLarge is a stream event over maxEvent.
var errEventTooLarge = errors.New("stream event larger than 16 MiB")

// sseReader reads the data of server-sent events, as the HTML standard
// defines them: "data:" lines (one optional space after the colon) joined
// with newlines, an event ending at a blank line; comments, "event:", "id:"
// and "retry:" lines are skipped. "error:" lines, which the standard does
// not know, are read as data too and mark their event (erred):
// llama.cpp's server sent its errors that way (ggml-org/llama.cpp 15ae7dd,
// examples/server/utils.hpp server_sent_event), and skipped, their message
// was lost. It is go-openai's stream reader without its per-line regular
// expressions, which cost more than decoding the chunk.
//
// It buffers the body itself rather than through a bufio.Reader, so that a
// stream that waits for its model holds a small buffer: a slow stream's
// events come one per read and are used up before the next, and a reader
// whose buffer is used up reads into small, its own 512 bytes. Only a read
// that fills small (events arriving faster than they are read, or a long
// line) takes a pooled buffer of net/http's default size, given back once
// it is used up and reads bring little again. With a 4 KiB buffer held by every
// open stream, 1,000 slow streams held 4 MB in them.
type sseReader struct {
	body  io.Reader
	buf   []byte         // small[:] or big[:]
	big   *[bigSize]byte // from bigBuffers while events come faster than they are read
	r, w  int            // buf[r:w] is read but not used yet
	n     int            // what the last read brought
	err   error          // the body's error, returned once buf[r:w] is used up
	long  []byte         // a line longer than big
	data  []byte
	erred bool // the last event next returned came in "error:" lines
	small [smallSize]byte
}

const (
	// smallSize holds one chunk event of the usual servers (200 to 400
	// bytes): a stream that waits between events never needs more.
	smallSize = 512
	// bigSize is the buffer of a stream whose events come faster than
	// they are read: net/http's default size. It is larger than the node
	// connection's own 1 KiB buffer (node.NewHTTPClient), so reads into
	// it go to the connection directly.
	bigSize = 4 << 10
)

// errBufferFull says that a line is longer than the largest buffer: line
// returns it in pieces.
var errBufferFull = errors.New("sse: buffer full")

var (
	readers    = sync.Pool{New: func() any { return new(sseReader) }}
	bigBuffers = sync.Pool{New: func() any { return new([bigSize]byte) }}
)

// newSSEReader returns a pooled reader of body; release it when done.
func newSSEReader(body io.Reader) *sseReader {
	r := readers.Get().(*sseReader)
	r.body, r.buf = body, r.small[:]
	return r
}

func (r *sseReader) release() {
	r.dropBig()
	r.body, r.buf, r.r, r.w, r.n, r.err, r.erred = nil, nil, 0, 0, 0, nil, false
	if cap(r.long) > 64<<10 {
		r.long = nil
	}
	if cap(r.data) > 64<<10 {
		r.data = nil
	}
	readers.Put(r)
}

// dropBig gives the big buffer back; buf must hold nothing unread.
func (r *sseReader) dropBig() {
	if r.big != nil {
		bigBuffers.Put(r.big)
		r.big, r.buf = nil, r.small[:]
	}
}

// next returns the data of the next event, valid until the next call, or
// io.EOF at the end of the body. An event that the body ends without a blank
// line after is returned.
func (r *sseReader) next() ([]byte, error) {
	r.data = r.data[:0]
	r.erred = false
	has := false
	for {
		line, err := r.line()
		if err != nil {
			if errors.Is(err, io.EOF) && has {
				return r.data, nil
			}
			return nil, err
		}
		if len(line) == 0 {
			if has {
				return r.data, nil
			}
			continue
		}
		value, ok := bytes.CutPrefix(line, []byte("data:"))
		if !ok {
			if value, ok = bytes.CutPrefix(line, []byte("error:")); !ok {
				continue
			}
			r.erred = true
		}
		if len(value) > 0 && value[0] == ' ' {
			value = value[1:]
		}
		if has {
			r.data = append(r.data, '\n')
		}
		if len(r.data)+len(value) > maxEvent {
			return nil, errEventTooLarge
		}
		r.data = append(r.data, value...)
		has = true
	}
}

// line returns the next line without its end ("\n" or "\r\n"), valid until
// the next call. A last line without an end is returned before io.EOF.
func (r *sseReader) line() ([]byte, error) {
	line, err := r.slice()
	if errors.Is(err, errBufferFull) {
		r.long = append(r.long[:0], line...)
		for errors.Is(err, errBufferFull) {
			if len(r.long) > maxEvent {
				return nil, errEventTooLarge
			}
			line, err = r.slice()
			r.long = append(r.long, line...)
		}
		line = r.long
	}
	if err != nil && !(errors.Is(err, io.EOF) && len(line) > 0) {
		return nil, err
	}
	line = bytes.TrimSuffix(line, []byte("\n"))
	return bytes.TrimSuffix(line, []byte("\r")), nil
}

// slice is bufio.Reader.ReadSlice('\n') on r's own buffer: the next line
// with its "\n", valid until the next call; errBufferFull with the whole
// buffer when the line is longer than it; the body's error with what is
// left at its end.
func (r *sseReader) slice() ([]byte, error) {
	for empty := 0; ; {
		if i := bytes.IndexByte(r.buf[r.r:r.w], '\n'); i >= 0 {
			line := r.buf[r.r : r.r+i+1]
			r.r += i + 1
			return line, nil
		}
		if r.err != nil {
			line, err := r.buf[r.r:r.w], r.err
			r.r, r.w, r.err = 0, 0, nil
			return line, err
		}
		if r.r == 0 && r.w == len(r.buf) && r.big != nil {
			r.r, r.w = 0, 0
			return r.buf, errBufferFull
		}
		if r.fill() {
			empty = 0
		} else if empty++; empty >= 100 {
			return nil, io.ErrNoProgress
		}
	}
}

// fill reads the body once into the free end of the buffer, after moving
// what is unread to its start, and reports whether the read brought bytes.
// A buffer used up after a small read reads into small, where a stream
// waits for its model; one that a read filled takes the big buffer for the
// reads that follow, and keeps it while they bring more than small holds.
func (r *sseReader) fill() bool {
	if r.r > 0 {
		r.w = copy(r.buf, r.buf[r.r:r.w])
		r.r = 0
	}
	switch {
	case r.w == 0 && r.n < smallSize:
		// All is used up and came in small reads: the next read may
		// well wait for the model.
		r.dropBig()
	case r.w == len(r.buf) && r.big == nil:
		r.big = bigBuffers.Get().(*[bigSize]byte)
		r.w = copy(r.big[:], r.buf[:r.w])
		r.buf = r.big[:]
	}
	n, err := r.body.Read(r.buf[r.w:])
	r.w += n
	r.n, r.err = n, err
	if r.w == len(r.buf) && r.big == nil {
		// Events come faster than they are read: the next reads take
		// more at once.
		r.big = bigBuffers.Get().(*[bigSize]byte)
		r.w = copy(r.big[:], r.buf[:r.w])
		r.buf = r.big[:]
	}
	return n > 0
}
