//go:build unix

package ontimebolt

import (
	"errors"
	"os"
	"syscall"
	"time"
)

// lockFile takes the same kind of lock bbolt takes (flock, exclusive),
// retrying until timeout. The lock belongs to this open file: closing f or
// calling unlock releases it.
func lockFile(f *os.File, timeout time.Duration) (unlock func(), err error) {
	deadline := time.Now().Add(timeout)
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil {
			return func() { _ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN) }, nil
		}
		if !errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, err
		}
		if time.Now().After(deadline) {
			return nil, ErrLocked
		}
		time.Sleep(min(50*time.Millisecond, time.Until(deadline)+time.Millisecond))
	}
}
