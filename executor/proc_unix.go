//go:build unix

package executor

import (
	"errors"
	"os"
	"os/exec"
	"syscall"
)

// signalGroup sends sig to the process group led by pid (the CLI runs in
// its own group, so its tools and MCP servers get it too).
func signalGroup(pid int, sig syscall.Signal) error {
	if pid <= 0 {
		return errors.New("no process")
	}
	err := syscall.Kill(-pid, sig)
	if errors.Is(err, syscall.ESRCH) {
		return nil // the group is gone already
	}
	return err
}

func interruptGroup(pid int) error { return signalGroup(pid, syscall.SIGINT) }
func killGroup(pid int) error      { return signalGroup(pid, syscall.SIGKILL) }

// exitStatus reads the exit code and, when a signal ended the process, its
// name.
func exitStatus(ps *os.ProcessState) (code int, signal string) {
	if ps == nil {
		return -1, ""
	}
	if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return -1, ws.Signal().String()
	}
	return ps.ExitCode(), ""
}

// startable reports whether err from Start means the CLI could not be
// executed at all.
func startable(err error) bool {
	return !(errors.Is(err, exec.ErrNotFound) || errors.Is(err, os.ErrNotExist) ||
		errors.Is(err, os.ErrPermission) || errors.Is(err, syscall.ENOEXEC))
}
