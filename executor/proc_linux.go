//go:build linux

package executor

import "syscall"

// sysProcAttr puts the CLI in its own process group and asks the kernel to
// send it SIGTERM when the orchestrator dies (even by SIGKILL), so that an
// orphaned CLI stops and its session stays resumable.
//
// Pdeathsig fires when the OS thread that started the child exits; the Go
// runtime does not end its threads unless a goroutine exits while locked to
// one with runtime.LockOSThread, so do not call Start from such a goroutine.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGTERM}
}
