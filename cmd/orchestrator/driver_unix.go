//go:build unix

package main

import (
	"errors"

	"golang.org/x/sys/unix"
)

// processAlive reports whether process pid exists (signal 0: nothing is
// sent; EPERM means it exists, owned by someone else).
func processAlive(pid int) bool {
	err := unix.Kill(pid, 0)
	return err == nil || errors.Is(err, unix.EPERM)
}
