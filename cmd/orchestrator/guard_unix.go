//go:build unix

package main

import (
	"errors"
	"syscall"
)

// groupAlive reports whether the process group pgid has a process left.
func groupAlive(pgid int) bool {
	err := syscall.Kill(-pgid, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}

// killGroupNow kills the process group pgid.
func killGroupNow(pgid int) error {
	if err := syscall.Kill(-pgid, syscall.SIGKILL); err != nil && !errors.Is(err, syscall.ESRCH) {
		return err
	}
	return nil
}

func guardProcAttr() *syscall.SysProcAttr { return &syscall.SysProcAttr{Setpgid: true} }

const guardSupported = true
