//go:build unix

package main

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"

	"golang.org/x/sys/unix"
)

// probeServe finds out whether a process holds the daemon lock of
// stateDir without taking it: taking it, even for a moment, could make a
// `serve` starting at that moment fail. flock has no "test" call, so the
// kernel's table of locks (/proc/locks, Linux) is read instead.
func probeServe(stateDir string) statusServe {
	path := filepath.Join(stateDir, "locks", "daemon.lock")
	var fi unix.Stat_t
	if err := unix.Stat(path, &fi); err != nil {
		if errors.Is(err, unix.ENOENT) {
			return statusServe{State: "stopped"} // no serve ever ran here
		}
		return statusServe{State: "unknown", Note: fmt.Sprintf("stat the daemon lock: %v", err)}
	}
	if runtime.GOOS != "linux" {
		return statusServe{State: "unknown", Note: "cannot tell on " + runtime.GOOS}
	}
	f, err := os.Open("/proc/locks")
	if err != nil {
		return statusServe{State: "unknown", Note: fmt.Sprintf("read the kernel's locks: %v", err)}
	}
	defer f.Close()
	pid, held, err := flockHolder(bufio.NewScanner(f), uint64(unix.Major(uint64(fi.Dev))), uint64(unix.Minor(uint64(fi.Dev))), fi.Ino)
	switch {
	case err != nil:
		return statusServe{State: "unknown", Note: fmt.Sprintf("read the kernel's locks: %v", err)}
	case held:
		return statusServe{State: "running", PID: pid}
	default:
		return statusServe{State: "stopped"}
	}
}
