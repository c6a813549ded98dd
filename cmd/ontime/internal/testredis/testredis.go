// Package testredis starts a throwaway redis-server on a free loopback port
// for tests: no persistence, killed when the test (or TestMain) ends.
package testredis

import (
	"bufio"
	"errors"
	"fmt"
	"net"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// Server is a running redis-server.
type Server struct {
	Addr string
	cmd  *exec.Cmd
	done chan struct{}
}

// URL is redis://Addr/0.
func (s *Server) URL() string { return "redis://" + s.Addr + "/0" }

// Available reports whether redis-server is installed.
func Available() bool {
	_, err := exec.LookPath("redis-server")
	return err == nil
}

// Start starts a redis-server. Call Stop when done (Start for a test
// registers it with t.Cleanup).
func Start() (*Server, error) {
	var lastErr error
	for range 5 {
		port, err := freePort()
		if err != nil {
			return nil, err
		}
		s, err := start(port)
		if err == nil {
			return s, nil
		}
		lastErr = err
	}
	return nil, lastErr
}

// StartT starts a server for one test and stops it at cleanup. It skips
// the test when redis-server is not installed.
func StartT(t testing.TB) *Server {
	t.Helper()
	if !Available() {
		t.Skip("redis-server is not installed")
	}
	s, err := Start()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Stop)
	return s
}

func freePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}

func start(port int) (*Server, error) {
	cmd := exec.Command("redis-server",
		"--port", strconv.Itoa(port), "--bind", "127.0.0.1",
		"--save", "", "--appendonly", "no", "--protected-mode", "no")
	cmd.SysProcAttr = procAttr()
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start redis-server: %w", err)
	}
	s := &Server{Addr: "127.0.0.1:" + strconv.Itoa(port), cmd: cmd, done: make(chan struct{})}
	go func() { _ = cmd.Wait(); close(s.done) }()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		select {
		case <-s.done:
			return nil, errors.New("redis-server exited at start (port taken?)")
		default:
		}
		if ping(s.Addr) == nil {
			return s, nil
		}
		time.Sleep(20 * time.Millisecond)
	}
	s.Stop()
	return nil, errors.New("redis-server did not answer PING within 10s")
}

func ping(addr string) error {
	c, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		return err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(time.Second))
	if _, err := c.Write([]byte("PING\r\n")); err != nil {
		return err
	}
	line, err := bufio.NewReader(c).ReadString('\n')
	if err != nil {
		return err
	}
	if !strings.HasPrefix(line, "+PONG") {
		return fmt.Errorf("PING answered %q", line)
	}
	return nil
}

// Stop kills the server and waits for it.
func (s *Server) Stop() {
	if s == nil || s.cmd.Process == nil {
		return
	}
	select {
	case <-s.done:
		return
	default:
	}
	_ = s.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-s.done:
	case <-time.After(3 * time.Second):
		_ = s.cmd.Process.Kill()
		<-s.done
	}
}
