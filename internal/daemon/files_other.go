//go:build !unix

package daemon

// fileUse is not known here: /healthz does not count open files.
func fileUse() (open, limit int, ok bool) { return 0, 0, false }

// outOfFiles: no error is told apart here.
func outOfFiles(error) bool { return false }

// fileLimit is not known here.
func fileLimit() (int, bool) { return 0, false }
