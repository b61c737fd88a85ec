package executor

import (
	"fmt"
	"sync"
)

// boundedBuffer keeps the first and the last bytes written to it, at most
// limit in all; it is safe for concurrent use.
type boundedBuffer struct {
	mu    sync.Mutex
	limit int
	head  []byte
	tail  []byte // ring of the last bytes once head is full
	start int    // ring start in tail
	total int64
}

func newBoundedBuffer(limit int) *boundedBuffer {
	if limit < 2 {
		limit = 2
	}
	return &boundedBuffer{limit: limit}
}

func (b *boundedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	n := len(p)
	b.total += int64(n)
	headMax := b.limit / 2
	if len(b.head) < headMax {
		k := min(headMax-len(b.head), len(p))
		b.head = append(b.head, p[:k]...)
		p = p[k:]
	}
	tailMax := b.limit - headMax
	for len(p) > 0 {
		if len(b.tail) < tailMax {
			k := min(tailMax-len(b.tail), len(p))
			b.tail = append(b.tail, p[:k]...)
			p = p[k:]
			continue
		}
		// The ring is full: overwrite the oldest bytes.
		if len(p) >= tailMax {
			copy(b.tail, p[len(p)-tailMax:])
			b.start = 0
			p = nil
			continue
		}
		if k := copy(b.tail[b.start:], p); k < len(p) {
			copy(b.tail, p[k:])
		}
		b.start = (b.start + len(p)) % tailMax
		p = nil
	}
	return n, nil
}

// String returns what was kept, with a marker where bytes were dropped.
func (b *boundedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	out := string(b.head)
	dropped := b.total - int64(len(b.head)) - int64(len(b.tail))
	if dropped > 0 {
		out += fmt.Sprintf("\n… (%d bytes of stderr dropped) …\n", dropped)
	}
	return out + string(b.tail[b.start:]) + string(b.tail[:b.start])
}
