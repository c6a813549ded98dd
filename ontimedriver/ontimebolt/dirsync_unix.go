//go:build unix

package ontimebolt

import "os"

// syncDir fsyncs a directory, so that the entries in it (the store file's
// name) survive a power loss. bbolt fsyncs the file's contents at every
// commit but never the directory that names the file.
func syncDir(dir string) error {
	f, err := os.Open(dir)
	if err != nil {
		return err
	}
	serr := f.Sync()
	cerr := f.Close()
	if serr != nil {
		return serr
	}
	return cerr
}
