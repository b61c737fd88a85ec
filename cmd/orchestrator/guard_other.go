//go:build !unix

package main

import "syscall"

func groupAlive(int) bool                 { return false }
func killGroupNow(int) error              { return errNoGuard }
func guardProcAttr() *syscall.SysProcAttr { return nil }

const guardSupported = false
