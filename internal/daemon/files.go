package daemon

import (
	"io"
	"log/slog"
	"net"
	"os"
	"strconv"
	"sync"
	"time"
)

// Open files. A process out of file descriptors cannot accept a
// connection: net/http's server then retries Accept with a backoff while
// the client waits, and /healthz and /metrics hang instead of answering.
// So the listener keeps one descriptor in reserve (a handle of the null
// device): when Accept fails for lack of descriptors, it gives the reserve
// back, accepts the waiting connection on it, answers 503 saying so, closes
// it and takes the reserve again. And /healthz turns 503 before the limit
// is reached, once fewer than fileHeadroom descriptors are left.

// fileHeadroom is how many free descriptors /healthz wants left under the
// limit: a sixteenth of it, at least 8 and at most 64.
func fileHeadroom(limit int) int { return max(8, min(64, limit/16)) }

// fileProblem says why /healthz is 503 for lack of descriptors, or "" when
// enough are left or the system does not say (fileUse).
func fileProblem() string {
	open, limit, ok := fileUse()
	if !ok || limit-open >= fileHeadroom(limit) {
		return ""
	}
	return "open files: " + thousands(open) + " of " + thousands(limit)
}

// outOfFilesReason is what a connection refused at the limit is told:
// every descriptor is in use (the reserve could not be taken again).
func outOfFilesReason() string {
	if limit, ok := fileLimit(); ok {
		return "open files: " + thousands(limit) + " of " + thousands(limit)
	}
	return "open files: out of file descriptors"
}

// thousands writes n with commas between groups of three digits.
func thousands(n int) string {
	s := strconv.Itoa(n)
	neg := n < 0
	if neg {
		s = s[1:]
	}
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	if neg {
		s = "-" + s
	}
	return s
}

// filesListener is a listener that answers 503 rather than leave a
// connection waiting when the process is out of descriptors.
type filesListener struct {
	net.Listener
	log *slog.Logger

	mu      sync.Mutex // guards the fields below; never held in Accept
	reserve *os.File   // nil when it could not be taken (again)
	refused int        // connections refused since the last log line
	logged  time.Time
}

// guardFiles wraps ln; log reports the connections refused (at most one
// line a minute).
func guardFiles(ln net.Listener, log *slog.Logger) net.Listener {
	l := &filesListener{Listener: ln, log: log}
	l.takeReserve() // none: Accept works as ln's until one is taken
	return l
}

// Accept returns the next connection. When the process is out of
// descriptors it accepts the waiting connections on the reserve
// descriptor and answers them 503, one by one, until a descriptor is free
// again; without a reserve it returns the error (net/http retries after a
// backoff).
func (l *filesListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err == nil {
			l.takeReserve()
			return c, nil
		}
		if !outOfFiles(err) || !l.giveReserve() {
			return nil, err
		}
		// The reserve's descriptor is free: accept on it. (Linux takes
		// the new descriptor before it waits for a connection: this one
		// may come much later, when descriptors are free again.)
		c, err = l.Listener.Accept()
		if err != nil {
			l.takeReserve()
			return nil, err
		}
		if l.takeReserve() {
			return c, nil // descriptors were freed meanwhile: serve it
		}
		reason := outOfFilesReason()
		answerOutOfFiles(c, reason)
		l.takeReserve()
		l.mu.Lock()
		l.refused++
		if now := time.Now(); now.Sub(l.logged) >= time.Minute {
			l.log.Error("out of file descriptors: HTTP requests are answered 503; raise the open-file limit (ulimit -n, systemd's LimitNOFILE) or find what holds them",
				"reason", reason, "refused", l.refused)
			l.logged, l.refused = now, 0
		}
		l.mu.Unlock()
	}
}

// takeReserve takes the reserve descriptor unless it is held; it reports
// whether it is held now.
func (l *filesListener) takeReserve() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.reserve == nil {
		l.reserve, _ = os.Open(os.DevNull)
	}
	return l.reserve != nil
}

// giveReserve closes the reserve descriptor, for the next Accept to use;
// false when there was none, and none to take now.
func (l *filesListener) giveReserve() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.reserve == nil {
		return false
	}
	l.reserve.Close()
	l.reserve = nil
	return true
}

// Close closes the listener (which ends a waiting Accept), then gives the
// reserve back.
func (l *filesListener) Close() error {
	err := l.Listener.Close()
	l.mu.Lock()
	if l.reserve != nil {
		l.reserve.Close()
		l.reserve = nil
	}
	l.mu.Unlock()
	return err
}

// answerOutOfFiles reads the request's head (briefly: a client that
// sends nothing is not waited for), answers 503 with a Health body, and
// closes the connection. Reading first lets the client see the answer:
// closing a socket with unread bytes resets it.
func answerOutOfFiles(c net.Conn, reason string) {
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(time.Second))
	var head []byte
	buf := make([]byte, 1024)
	for len(head) < 16<<10 {
		n, err := c.Read(buf)
		head = append(head, buf[:n]...)
		if err != nil || endOfHead(head) {
			break
		}
	}
	body := `{"status":"error","error":` + strconv.Quote(reason) + "}\n"
	_, _ = io.WriteString(c, "HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json\r\nCache-Control: no-store\r\n"+
		"Connection: close\r\nContent-Length: "+strconv.Itoa(len(body))+"\r\n\r\n"+body)
	if tc, ok := c.(interface{ CloseWrite() error }); ok {
		_ = tc.CloseWrite()
		_, _ = io.Copy(io.Discard, io.LimitReader(c, 64<<10)) // until the client closes, or the deadline
	}
}

func endOfHead(b []byte) bool {
	for i := 0; i+3 < len(b); i++ {
		if b[i] == '\r' && b[i+1] == '\n' && b[i+2] == '\r' && b[i+3] == '\n' {
			return true
		}
	}
	return false
}
