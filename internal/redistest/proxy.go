package redistest

import (
	"net"
	"sync"
	"testing"
)

// Proxy is a TCP proxy in front of a Redis server, owned by a test, that
// can stop forwarding: a network partition between the clients that dial
// Proxy.Addr and the server, while both stay up.
type Proxy struct {
	// Addr is 127.0.0.1:port; clients dial it instead of the server.
	Addr string

	target string
	ln     net.Listener

	mu          sync.Mutex
	cond        *sync.Cond
	partitioned bool
	closed      bool
	accepted    int
	conns       map[net.Conn]struct{}
	wg          sync.WaitGroup
}

// StartProxy starts a proxy to target (host:port) on a free loopback port.
// It is closed, with every connection through it, when tb ends.
func StartProxy(tb testing.TB, target string) *Proxy {
	tb.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatalf("redistest: proxy listen: %v", err)
	}
	p := &Proxy{Addr: ln.Addr().String(), target: target, ln: ln, conns: map[net.Conn]struct{}{}}
	p.cond = sync.NewCond(&p.mu)
	p.wg.Add(1)
	go p.accept()
	tb.Cleanup(p.Close)
	return p
}

// Partition stops forwarding in both directions. Connections stay open and
// new ones are accepted, but no byte crosses the proxy: what clients and
// server send is held (as a network holds packets it cannot deliver, which
// TCP retransmits) and delivered after Heal. Commands sent during the
// partition hang, as they would on a real partition.
func (p *Proxy) Partition() {
	p.mu.Lock()
	p.partitioned = true
	p.mu.Unlock()
}

// Heal resumes forwarding, held bytes first.
func (p *Proxy) Heal() {
	p.mu.Lock()
	p.partitioned = false
	p.cond.Broadcast()
	p.mu.Unlock()
}

// Reset closes every connection through the proxy, as a server restart or
// a failover does; new connections are accepted (and held, while
// partitioned).
func (p *Proxy) Reset() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for c := range p.conns {
		_ = c.Close()
	}
}

// Accepted returns how many connections the proxy has accepted: a test
// waits on it to know that a client is (re)dialling.
func (p *Proxy) Accepted() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.accepted
}

// Close stops the proxy, closes every connection through it and waits for
// its goroutines.
func (p *Proxy) Close() {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return
	}
	p.closed = true
	p.cond.Broadcast()
	for c := range p.conns {
		_ = c.Close()
	}
	p.mu.Unlock()
	_ = p.ln.Close()
	p.wg.Wait()
}

func (p *Proxy) accept() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.mu.Lock()
		p.accepted++
		p.mu.Unlock()
		s, err := net.Dial("tcp", p.target)
		if err != nil {
			_ = c.Close()
			continue
		}
		if !p.track(c, s) {
			return
		}
		p.wg.Add(2)
		go p.pipe(s, c)
		go p.pipe(c, s)
	}
}

// track registers both ends of a proxied connection; false once closed.
func (p *Proxy) track(cs ...net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		for _, c := range cs {
			_ = c.Close()
		}
		return false
	}
	for _, c := range cs {
		p.conns[c] = struct{}{}
	}
	return true
}

// pipe copies from src to dst, holding each chunk while partitioned.
func (p *Proxy) pipe(dst, src net.Conn) {
	defer p.wg.Done()
	defer func() {
		_ = dst.Close()
		_ = src.Close()
		p.mu.Lock()
		delete(p.conns, dst)
		delete(p.conns, src)
		p.mu.Unlock()
	}()
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			if !p.wait() {
				return
			}
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return // EOF or a closed connection: close both ends
		}
	}
}

// wait blocks while partitioned; false once the proxy is closed.
func (p *Proxy) wait() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	for p.partitioned && !p.closed {
		p.cond.Wait()
	}
	return !p.closed
}
