package cli

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http/httputil"
	"strconv"
	"time"
)

// benchConn is one keep-alive HTTP/1.1 connection of bench-api over plain
// http. It writes the same prepared request again and again and reads each
// response itself (status line, headers, then a body of Content-Length
// bytes, a chunked body, or one that ends with the connection), with no
// goroutines of its own and no allocation per request: the load generator
// shares the CPUs with the server it measures, and net/http's client (a
// read and a write goroutine per connection, a Request and a Response per
// call) cost about as much CPU per request as the server did. https servers
// are measured through net/http (benchHTTPClient).
type benchConn struct {
	addr    string
	req     []byte // the whole request, headers and body
	timeout time.Duration
	c       net.Conn
	br      *bufio.Reader
	until   time.Time // the connection's current deadline
}

// benchRequest is a POST of body to path on host, as HTTP/1.1 bytes.
func benchRequest(host, path, token string, body []byte) []byte {
	var b bytes.Buffer
	fmt.Fprintf(&b, "POST %s HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n", path, host, len(body))
	if token != "" {
		fmt.Fprintf(&b, "Authorization: Bearer %s\r\n", token)
	}
	b.WriteString("\r\n")
	b.Write(body)
	return b.Bytes()
}

// do sends the request once and reads the answer; any status but 201 is an
// error. On a failure the connection is closed, and the next call dials a
// new one. Each request has timeout to complete (refreshed once a second
// rather than per request, so up to a second more).
func (b *benchConn) do(ctx context.Context) error {
	if b.c == nil {
		var d net.Dialer
		c, err := d.DialContext(ctx, "tcp", b.addr)
		if err != nil {
			return err
		}
		b.c = c
		if b.br == nil {
			b.br = bufio.NewReaderSize(c, 4096)
		} else {
			b.br.Reset(c)
		}
		b.until = time.Time{}
		// Unblock a read or write in progress when ctx ends.
		stop := context.AfterFunc(ctx, func() { _ = c.SetDeadline(time.Unix(1, 0)) })
		b.c = &stopConn{Conn: c, stop: stop}
	}
	if now := time.Now(); b.until.Sub(now) < b.timeout-time.Second {
		b.until = now.Add(b.timeout)
		if err := b.c.SetDeadline(b.until); err != nil {
			b.close()
			return err
		}
	}
	if ctx.Err() != nil {
		b.close()
		return ctx.Err()
	}
	if _, err := b.c.Write(b.req); err != nil {
		b.close()
		return err
	}
	status, keep, err := readBenchResponse(b.br)
	if err != nil || !keep {
		b.close()
	}
	if err != nil {
		return err
	}
	if status != 201 {
		return fmt.Errorf("status %d", status)
	}
	return nil
}

func (b *benchConn) close() {
	if b.c != nil {
		_ = b.c.Close()
		b.c = nil
	}
}

// stopConn ends its context.AfterFunc when closed.
type stopConn struct {
	net.Conn
	stop func() bool
}

func (c *stopConn) Close() error {
	c.stop()
	return c.Conn.Close()
}

var (
	errBenchStatusLine = errors.New("malformed HTTP status line")
	errBenchHeader     = errors.New("malformed HTTP header line")
)

// readBenchResponse reads one HTTP/1.x response from br and discards its
// body. keep reports whether the connection may carry another request.
// Informational (1xx) answers are skipped.
func readBenchResponse(br *bufio.Reader) (status int, keep bool, err error) {
	for {
		line, err := br.ReadSlice('\n')
		if err != nil {
			return 0, false, err
		}
		// "HTTP/1.1 201 Created\r\n"
		if len(line) < 12 || !bytes.HasPrefix(line, []byte("HTTP/1.")) || line[8] != ' ' {
			return 0, false, errBenchStatusLine
		}
		http10 := line[7] == '0'
		status, err = strconv.Atoi(string(line[9:12]))
		if err != nil || status < 100 {
			return 0, false, errBenchStatusLine
		}
		length := int64(-1)
		chunked, closing := false, http10
		for {
			line, err := br.ReadSlice('\n')
			if err != nil {
				if errors.Is(err, bufio.ErrBufferFull) {
					return 0, false, errBenchHeader
				}
				return 0, false, err
			}
			line = bytes.TrimRight(line, "\r\n")
			if len(line) == 0 {
				break
			}
			name, value, ok := bytes.Cut(line, []byte(":"))
			if !ok {
				return 0, false, errBenchHeader
			}
			value = bytes.TrimSpace(value)
			switch {
			case bytes.EqualFold(name, []byte("Content-Length")):
				n, err := strconv.ParseInt(string(value), 10, 64)
				if err != nil || n < 0 {
					return 0, false, errBenchHeader
				}
				length = n
			case bytes.EqualFold(name, []byte("Transfer-Encoding")):
				chunked = bytes.EqualFold(value, []byte("chunked"))
				if !chunked {
					return 0, false, fmt.Errorf("unsupported Transfer-Encoding %q", value)
				}
			case bytes.EqualFold(name, []byte("Connection")):
				switch {
				case bytes.EqualFold(value, []byte("close")):
					closing = true
				case bytes.EqualFold(value, []byte("keep-alive")):
					closing = false
				}
			}
		}
		switch {
		case status >= 100 && status < 200 && status != 101:
			continue
		case status == 204 || status == 304:
		case chunked:
			if _, err := io.Copy(io.Discard, httputil.NewChunkedReader(br)); err != nil {
				return 0, false, err
			}
			// Trailers, then the blank line.
			for {
				line, err := br.ReadSlice('\n')
				if err != nil {
					return 0, false, err
				}
				if len(bytes.TrimRight(line, "\r\n")) == 0 {
					break
				}
			}
		case length >= 0:
			if _, err := br.Discard(int(length)); err != nil {
				return 0, false, err
			}
		default: // the body ends with the connection
			if _, err := io.Copy(io.Discard, br); err != nil {
				return 0, false, err
			}
			closing = true
		}
		return status, !closing, nil
	}
}
