package openai

import (
	"bufio"
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
// and "retry:" lines are skipped. It is go-openai's stream reader without
// its per-line regular expressions, which cost more than decoding the
// chunk.
type sseReader struct {
	br   *bufio.Reader
	long []byte // a line longer than br's buffer
	data []byte
}

// readerSize is the read buffer of a stream: an event is a few hundred
// bytes, and a longer line is read in pieces (line). A stream holds its
// buffer while it is open, so it is net/http's own size rather than a
// larger one: 1,000 open streams held 16 MB in 16 KiB buffers.
const readerSize = 4 << 10

var readers = sync.Pool{New: func() any { return &sseReader{br: bufio.NewReaderSize(nil, readerSize)} }}

// newSSEReader returns a pooled reader of body; release it when done.
func newSSEReader(body io.Reader) *sseReader {
	r := readers.Get().(*sseReader)
	r.br.Reset(body)
	return r
}

func (r *sseReader) release() {
	r.br.Reset(nil)
	if cap(r.long) > 64<<10 {
		r.long = nil
	}
	if cap(r.data) > 64<<10 {
		r.data = nil
	}
	readers.Put(r)
}

// next returns the data of the next event, valid until the next call, or
// io.EOF at the end of the body. An event that the body ends without a blank
// line after is returned.
func (r *sseReader) next() ([]byte, error) {
	r.data = r.data[:0]
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
			continue
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
	line, err := r.br.ReadSlice('\n')
	if errors.Is(err, bufio.ErrBufferFull) {
		r.long = append(r.long[:0], line...)
		for errors.Is(err, bufio.ErrBufferFull) {
			if len(r.long) > maxEvent {
				return nil, errEventTooLarge
			}
			line, err = r.br.ReadSlice('\n')
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
