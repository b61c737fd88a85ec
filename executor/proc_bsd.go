//go:build unix && !linux

package executor

import "syscall"

// sysProcAttr puts the CLI in its own process group. (Only Linux has a
// parent-death signal.)
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true}
}
