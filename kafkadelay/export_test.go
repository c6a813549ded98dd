package kafkadelay

// SetTestHookBeforeCommit sets a function that runs between the snapshot
// of offsets and their commit ("loop" or "revoke"), and returns a function
// that removes it.
func SetTestHookBeforeCommit(f func(kind string)) (restore func()) {
	testHookBeforeCommit = f
	return func() { testHookBeforeCommit = nil }
}
