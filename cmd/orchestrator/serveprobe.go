package main

import (
	"bufio"
	"strconv"
	"strings"
)

// statusServe says whether a `serve` holds the state directory's daemon
// lock (internal/store/lock.go: locks/daemon.lock, an flock). State is
// "running", "stopped" or "unknown" (why in Note).
type statusServe struct {
	State string `json:"state"`
	PID   int    `json:"pid,omitempty"`
	Note  string `json:"note,omitempty"`
}

// flockHolder scans /proc/locks lines ("1: FLOCK  ADVISORY  WRITE 1234
// fe:00:9988203 0 EOF") for an flock held on the file (device major:minor
// in hex, inode in decimal) and returns the holder's pid. Lines of waiters
// ("1: -> FLOCK …") are not holders.
func flockHolder(sc *bufio.Scanner, major, minor, ino uint64) (pid int, held bool, err error) {
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 6 || f[1] != "FLOCK" {
			continue
		}
		dev := strings.Split(f[5], ":")
		if len(dev) != 3 {
			continue
		}
		maj, err1 := strconv.ParseUint(dev[0], 16, 32)
		mnr, err2 := strconv.ParseUint(dev[1], 16, 32)
		in, err3 := strconv.ParseUint(dev[2], 10, 64)
		if err1 != nil || err2 != nil || err3 != nil || maj != major || mnr != minor || in != ino {
			continue
		}
		pid, _ = strconv.Atoi(f[4])
		return pid, true, nil
	}
	return 0, false, sc.Err()
}
