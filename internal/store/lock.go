package store

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"
)

// ErrLocked reports that another process drives the run.
var ErrLocked = errors.New("locked by another process")

// Lock is an exclusive, advisory lock held by this process. The kernel
// releases it when the process dies, however it dies, so a crash never
// leaves a run locked.
//
// On a shared store a run's lock is its lease instead (cluster.go): it
// lasts while this process renews it, and Lost tells when it was lost.
type Lock struct {
	f *os.File

	token            int64        // the take's fencing token (fence.go)
	release          func() error // a lease's
	lost, stop, done chan struct{}
	lostOnce         sync.Once
}

// LockRun takes the lock that says "this process drives run id". It fails at
// once, with an error wrapping ErrLocked that names the holder (its PID, or
// on a shared store its instance), when another process holds it.
func (s *Store) LockRun(id string) (*Lock, error) {
	l, err := s.lockRun(id)
	if err != nil {
		return nil, err
	}
	s.held.Store(id, l.token)
	release := l.release
	l.release = func() error {
		s.held.CompareAndDelete(id, l.token)
		if release != nil {
			return release()
		}
		l.release = nil
		return l.Unlock()
	}
	return l, nil
}

// HeldToken is the fencing token of this process's lock of run id (the
// hook of the CLI it starts carries it), 0 when it holds none.
func (s *Store) HeldToken(id string) int64 {
	if v, ok := s.held.Load(id); ok {
		return v.(int64)
	}
	return 0
}

func (s *Store) lockRun(id string) (*Lock, error) {
	if s.Shared() {
		return s.leaseLock(id)
	}
	l, err := s.lock("run-" + id)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	if l.token, err = s.takeToken(ctx, id); err != nil {
		l.Unlock()
		return nil, err
	}
	if token := l.token; token != 0 {
		l.release = func() error {
			err := s.giveBackToken(id, token)
			l.release = nil
			return errors.Join(err, l.Unlock())
		}
	}
	return l, nil
}

// Token is the fencing token of this take of a run's lock (fence.go): one
// higher than the run's last take's, anywhere. Zero for other locks.
func (l *Lock) Token() int64 {
	if l == nil {
		return 0
	}
	return l.token
}

// Lost is closed when the lock was lost: a lease that could not be renewed
// in time, or that another instance took over after this one stalled. The
// holder must stop driving the run. A file lock is never lost (nil).
func (l *Lock) Lost() <-chan struct{} {
	if l == nil {
		return nil
	}
	return l.lost
}

func (l *Lock) markLost() { l.lostOnce.Do(func() { close(l.lost) }) }

// LockDaemon takes the lock of the one `serve` daemon of a state directory.
func (s *Store) LockDaemon() (*Lock, error) { return s.lock("daemon") }

func (s *Store) lock(name string) (*Lock, error) {
	dir := filepath.Join(s.dir, "locks")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("lock %s: %w", name, err)
	}
	path := filepath.Join(dir, name+".lock")
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("lock %s: %w", name, err)
	}
	if busy, err := tryLock(f); err != nil || busy {
		holder, _ := os.ReadFile(path)
		f.Close()
		if busy {
			pid := strings.TrimSpace(string(holder))
			if pid == "" {
				pid = "unknown"
			}
			return nil, fmt.Errorf("%s is %w (pid %s)", strings.Replace(name, "-", " ", 1), ErrLocked, pid)
		}
		return nil, fmt.Errorf("lock %s: %w", name, err)
	}
	if err := f.Truncate(0); err == nil {
		f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	}
	return &Lock{f: f}, nil
}

// Unlock releases the lock.
func (l *Lock) Unlock() error {
	if l != nil && l.release != nil {
		release := l.release
		l.release = nil
		return release()
	}
	if l == nil || l.f == nil {
		return nil
	}
	err := l.f.Close() // closing the file releases the lock
	l.f = nil
	return err
}

// RunDriven reports whether a process (this one included) holds the lock of
// run id: whether some process drives it now.
func (s *Store) RunDriven(id string) (bool, error) {
	if s.Shared() {
		return s.leaseLive(id)
	}
	path := filepath.Join(s.dir, "locks", "run-"+id+".lock")
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if errors.Is(err, os.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("lock of run %s: %w", id, err)
	}
	defer f.Close() // releases the lock just taken, if it was free
	busy, err := tryLock(f)
	if err != nil {
		return false, fmt.Errorf("lock of run %s: %w", id, err)
	}
	return busy, nil
}
