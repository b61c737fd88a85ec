//go:build !unix

package executor

import (
	"errors"
	"os"
	"os/exec"
	"syscall"
)

// On systems without process groups the CLI itself is interrupted/killed.

func sysProcAttr() *syscall.SysProcAttr { return nil }

func interruptGroup(pid int) error {
	p, err := os.FindProcess(pid)
	if err != nil {
		return err
	}
	return p.Signal(os.Interrupt)
}

func killGroup(pid int) error {
	p, err := os.FindProcess(pid)
	if err != nil {
		return err
	}
	return p.Kill()
}

func exitStatus(ps *os.ProcessState) (int, string) {
	if ps == nil {
		return -1, ""
	}
	return ps.ExitCode(), ""
}

func startable(err error) bool {
	return !(errors.Is(err, exec.ErrNotFound) || errors.Is(err, os.ErrNotExist) || errors.Is(err, os.ErrPermission))
}
