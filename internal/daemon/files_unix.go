//go:build unix

package daemon

import (
	"errors"
	"os"
	"syscall"
)

// fileUse counts the descriptors this process has open and its limit
// (RLIMIT_NOFILE's soft value); ok is false when the system does not
// say. At the limit, reading the count itself fails for lack of a
// descriptor: the process is then at its limit.
func fileUse() (open, limit int, ok bool) {
	if limit, ok = fileLimit(); !ok {
		return 0, 0, false
	}
	for _, dir := range []string{"/proc/self/fd", "/dev/fd"} {
		f, err := os.Open(dir)
		if outOfFiles(err) {
			return limit, limit, true
		}
		if err != nil {
			continue
		}
		names, err := f.Readdirnames(-1)
		f.Close()
		if err != nil {
			continue
		}
		return len(names) - 1, limit, true // less the directory's own
	}
	return 0, 0, false
}

// outOfFiles reports whether err is for lack of descriptors: the
// process's (EMFILE) or the system's (ENFILE).
func outOfFiles(err error) bool {
	return errors.Is(err, syscall.EMFILE) || errors.Is(err, syscall.ENFILE)
}

// fileLimit is the process's open-file limit (RLIMIT_NOFILE's soft
// value); ok is false when there is none to speak of.
func fileLimit() (int, bool) {
	var rl syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &rl); err != nil || rl.Cur == 0 || rl.Cur > 1<<31 {
		return 0, false
	}
	return int(rl.Cur), true
}
