//go:build !unix

package main

import "runtime"

// probeServe cannot tell without taking the lock where there is no
// /proc/locks to read (see serveprobe_unix.go).
func probeServe(string) statusServe {
	return statusServe{State: "unknown", Note: "cannot tell on " + runtime.GOOS}
}
