//go:build !unix

package ontimebolt

// syncDir is a no-op where a directory cannot be opened and fsynced like a
// file (Windows among others): there, whether a new file's name survives a
// power loss is up to the file system.
func syncDir(string) error { return nil }
