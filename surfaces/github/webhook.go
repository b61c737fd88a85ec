package github

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"mime"
	"net/http"
	"strings"

	gh "github.com/google/go-github/v60/github"
)

// maxWebhookBody is GitHub's cap on a delivery's payload.
const maxWebhookBody = 25 << 20

// maxDeliveries is how many delivery IDs are remembered for deduplication.
const maxDeliveries = 10000

// deliveries remembers recent X-GitHub-Delivery IDs (guarded by Client.mu).
type deliveries struct {
	seen  map[string]bool
	order []string
}

// add reports whether id is new, remembering it.
func (d *deliveries) add(id string) bool {
	if d.seen == nil {
		d.seen = make(map[string]bool)
	}
	if d.seen[id] {
		return false
	}
	d.seen[id] = true
	d.order = append(d.order, id)
	if len(d.order) > maxDeliveries {
		delete(d.seen, d.order[0])
		d.order = d.order[1:]
	}
	return true
}

// WebhookHandler returns the handler for GitHub's issue_comment webhook, to
// be mounted by the serve daemon. Deliveries must carry a valid
// X-Hub-Signature-256 (HMAC-SHA256 of the body with the webhook secret,
// checked in constant time): others get 401 and change nothing. Each
// X-GitHub-Delivery is handled once. The handler answers 202 at once and
// reads the comment afterwards. It refuses to start without a secret.
//
// A delivery helps the client whose Asks wait on the comment's issue: it
// reads the comment at once instead of at its next poll. Elsewhere —
// another `serve` instance of a cluster than the leader, which asks and
// polls (or than the instance whose running turn asks an approval there) —
// the delivery is accepted (202, so GitHub does not send it again), nothing
// is requested or recorded here, and OnIdleDelivery is called: the serve
// daemon nudges the instances through the shared store, and the one whose
// Asks wait there polls at once (PollNow). Were the nudge lost, the asking
// instance's poll still lists the comment within poll_interval.
func (c *Client) WebhookHandler() (http.Handler, error) {
	if len(c.secret) == 0 {
		return nil, errors.New("github webhook: no webhook_secret configured; refusing to accept unsigned deliveries")
	}
	return http.HandlerFunc(c.serveWebhook), nil
}

func (c *Client) serveWebhook(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, maxWebhookBody+1))
	if err != nil {
		http.Error(w, "read body", http.StatusBadRequest)
		return
	}
	if len(body) > maxWebhookBody {
		http.Error(w, "payload too large", http.StatusRequestEntityTooLarge)
		return
	}
	payload, err := verifiedPayload(c.secret, r.Header.Get("Content-Type"), body, r.Header.Get("X-Hub-Signature-256"))
	if err != nil {
		c.log.Warn("github webhook: refused", "remote", r.RemoteAddr, "delivery", r.Header.Get("X-GitHub-Delivery"), "err", err)
		http.Error(w, "invalid signature", http.StatusUnauthorized)
		return
	}
	event := r.Header.Get("X-GitHub-Event")
	delivery := r.Header.Get("X-GitHub-Delivery")
	if event == "ping" {
		w.WriteHeader(http.StatusOK)
		return
	}
	if event == "issues" {
		c.triggerIssuesEvent(w, delivery, payload) // triggers_webhook.go
		return
	}
	if event != "issue_comment" {
		w.WriteHeader(http.StatusNoContent)
		return
	}
	var ev gh.IssueCommentEvent
	if err := json.Unmarshal(payload, &ev); err != nil {
		http.Error(w, "invalid issue_comment payload", http.StatusBadRequest)
		return
	}
	if delivery != "" {
		c.mu.Lock()
		fresh := c.deliveries.add(delivery)
		c.mu.Unlock()
		if !fresh {
			w.WriteHeader(http.StatusOK) // a redelivery: already handled
			return
		}
	}
	if ev.GetAction() == "deleted" && ev.Comment != nil && ev.Repo != nil {
		// A question comment deleted is posted again.
		p := c.lookupPoller(ev.GetRepo().GetFullName())
		if p == nil {
			p = c.pollerByID(ev.GetRepo().GetID())
		}
		w.WriteHeader(http.StatusAccepted)
		if p != nil && c.ctx.Err() == nil {
			c.wg.Add(1)
			go func() {
				defer c.wg.Done()
				p.deleted(c.ctx, ev.GetComment().GetID())
			}()
		}
		return
	}
	if ev.GetAction() != "created" || ev.Comment == nil || ev.Issue == nil || ev.Repo == nil {
		w.WriteHeader(http.StatusNoContent)
		return
	}
	c.triggerComment(ev) // triggers_webhook.go
	repo, issue := ev.GetRepo().GetFullName(), ev.GetIssue().GetNumber()
	p := c.lookupPoller(repo)
	if p == nil {
		// Matched by ID: a renamed repository is delivered under its new
		// name.
		if p = c.pollerByID(ev.GetRepo().GetID()); p != nil {
			repo = p.owner + "/" + p.name
		}
	}
	w.WriteHeader(http.StatusAccepted)
	if c.ctx.Err() != nil {
		return
	}
	// No poller, or none of its Asks on this issue: here nothing waits for
	// the comment (on a cluster, this instance does not lead).
	idle := p == nil || len(p.waitersFor(issue)) == 0
	if idle && c.onIdle != nil {
		c.wg.Add(1)
		go func() {
			defer c.wg.Done()
			c.onIdle(repo, issue)
		}()
	}
	if p == nil {
		return
	}
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		p.handle(c.ctx, issue, []*gh.IssueComment{ev.Comment})
	}()
}

// verifiedPayload checks a delivery's X-Hub-Signature-256 ("sha256=<hex
// HMAC-SHA256 of the body with the secret>", compared in constant time by
// go-github) and returns its JSON, sent as JSON or as a form with a payload
// field. Only SHA-256 is accepted: the header name promises it.
func verifiedPayload(secret []byte, contentType string, body []byte, signature string) ([]byte, error) {
	if !strings.HasPrefix(signature, "sha256=") {
		return nil, errors.New("no sha256 signature")
	}
	mt, _, _ := mime.ParseMediaType(contentType)
	if mt != "application/x-www-form-urlencoded" {
		mt = "application/json" // GitHub's default; a missing type is read as JSON
	}
	return gh.ValidatePayloadFromBody(mt, bytes.NewReader(body), signature, secret)
}
