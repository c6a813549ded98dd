package ontimebolt

import (
	"errors"
	"fmt"
)

// Errors of this driver, besides the ontimedriver sentinels. Both are
// wrapped with the file's path; compare with errors.Is.
var (
	// ErrLocked: another process (or another Driver in this process) has
	// the file open, and it was not released within Options.LockTimeout.
	ErrLocked = errors.New("ontimebolt: store file is locked by another process")
	// ErrCorrupt: the file is not an ontimebolt store, is truncated, or a
	// page or record in it is damaged.
	ErrCorrupt = errors.New("ontimebolt: store file is corrupt")
)

// ReasonCorrupt is the dead-letter reason Claim gives a timer whose stored
// record is damaged (bad checksum or undecodable). Its Payload is then the
// raw stored record, its Due the instant it was claimable.
const ReasonCorrupt = "corrupt"

// corruptError builds an error naming the file that wraps ErrCorrupt.
func corruptError(path, format string, args ...any) error {
	return fmt.Errorf("%w: %s: %s", ErrCorrupt, path, fmt.Sprintf(format, args...))
}
