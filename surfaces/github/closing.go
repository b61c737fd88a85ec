package github

import (
	"context"
	"time"
)

// CloseGrace is how long Close lets work accepted before it finish: a 👀
// on an answer the store took, on feedback queued or on a comment that
// started a run. Each of its requests keeps its own timeout too
// (request_timeout). Past it, Close cancels them.
const CloseGrace = 10 * time.Second

// accepted returns a context for a request acknowledging what was
// accepted already (a reaction): it has ctx's values but not its end,
// which Close brings; it ends closeGrace after Close instead. A person
// whose answer was taken sees 👀 even when the process stops meanwhile.
func (c *Client) accepted(ctx context.Context) (context.Context, context.CancelFunc) {
	actx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	stop := context.AfterFunc(c.drain, cancel)
	return actx, func() { stop(); cancel() }
}

// Close stops the client's pollers and webhook work and waits for them;
// the requests acknowledging what was accepted before (accepted) finish,
// for at most CloseGrace. Surfaces made from it stop taking answers.
func (c *Client) Close() error {
	c.cancel()
	done := make(chan struct{})
	go func() {
		c.wg.Wait()
		close(done)
	}()
	grace := time.NewTimer(c.closeGrace)
	defer grace.Stop()
	select {
	case <-done:
	case <-grace.C:
		c.endDrain()
		<-done
	}
	c.endDrain()
	return nil
}
