//go:build !unix

package main

import (
	"errors"
	"syscall"
)

// errNoGuard is the guard's error where process groups are not known.
var errNoGuard = errors.New("the agent CLI's guard needs process groups (unix)")

func groupAlive(int) bool                 { return false }
func killGroupNow(int) error              { return errNoGuard }
func guardProcAttr() *syscall.SysProcAttr { return nil }

const guardSupported = false
