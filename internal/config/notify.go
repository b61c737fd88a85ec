package config

import (
	"fmt"
	"net"
	"net/url"
	"slices"
	"strings"
	"time"
)

// Notify says which events are told where (internal/notify): the spec's
// surfaces and webhooks. A spec's notify: section replaces Surfaces and
// Webhooks for its runs when it sets them.
type Notify struct {
	// Secret signs every webhook delivery (HMAC-SHA256); required with
	// webhooks. Keep it in the environment: secret: ${NOTIFY_SECRET}.
	Secret      string `yaml:"secret"`
	NotifyRoute `yaml:",inline"`
}

// NotifyRoute is where events go: the configuration's notify, or a
// spec's.
type NotifyRoute struct {
	// Surfaces are the events posted as notices on the run's surfaces
	// (its GitHub issue, the terminal log).
	Surfaces []string `yaml:"surfaces"`
	// Webhooks receive signed JSON events.
	Webhooks []NotifyWebhook `yaml:"webhooks"`
	// WaitingAfter is how long a question waits before a "waiting" event;
	// default 1h.
	WaitingAfter Duration `yaml:"waiting_after"`
}

// NotifyWebhook is a receiver of events.
type NotifyWebhook struct {
	// URL is https, or plain http to a loopback address.
	URL string `yaml:"url"`
	// Events are the events it receives; empty: every event.
	Events []string `yaml:"events"`
}

// NotifyEvents are the events notify routes (internal/notify.Kinds).
var NotifyEvents = []string{"done", "failed", "stopped", "paused", "cap_reached", "waiting"}

// DefaultWaitingAfter is notify.waiting_after's default.
const DefaultWaitingAfter = Duration(time.Hour)

// DefaultPauseAfterFailures is serve.pause_after_failures' default.
const DefaultPauseAfterFailures = 3

// Check reports the problems of a route, at keys relative to it.
func (r NotifyRoute) Check(c *Checker) {
	events := func(key string, list []string) {
		for i, e := range list {
			if !slices.Contains(NotifyEvents, e) {
				c.Add(fmt.Sprintf("%s[%d]", key, i), "unknown event %q (known: %s)", e, strings.Join(NotifyEvents, ", "))
			}
		}
	}
	events("surfaces", r.Surfaces)
	for i, w := range r.Webhooks {
		key := fmt.Sprintf("webhooks[%d]", i)
		if err := CheckWebhookURL(w.URL); err != nil {
			c.Add(key+".url", "%v", err)
		}
		events(key+".events", w.Events)
	}
	if r.WaitingAfter < 0 {
		c.Add("waiting_after", "must not be negative")
	}
}

// CheckWebhookURL checks a webhook URL: https, or plain http only to a
// loopback address (a local relay, tests). The URL is not shown: it may
// carry a token.
func CheckWebhookURL(raw string) error {
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" {
		return fmt.Errorf("want an absolute https URL")
	}
	if u.User != nil {
		return fmt.Errorf("must not hold a user or password (deliveries are signed with notify.secret)")
	}
	switch u.Scheme {
	case "https":
		return nil
	case "http":
		host := u.Hostname()
		if ip := net.ParseIP(host); host == "localhost" || (ip != nil && ip.IsLoopback()) {
			return nil
		}
		return fmt.Errorf("plain http only to a loopback address (127.0.0.1, ::1, localhost): use https")
	}
	return fmt.Errorf("want an https URL, not %s", u.Scheme)
}

// check reports the problems of the configuration's notify block.
func (n Notify) check(v *validator) {
	n.NotifyRoute.Check(&Checker{add: func(key, msg string) { v.add("notify."+key, "%s", msg) }})
	if len(n.Webhooks) > 0 && strings.TrimSpace(n.Secret) == "" {
		v.add("notify.secret", "required with notify.webhooks: every delivery is signed (set it from the environment: ${NOTIFY_SECRET})")
	}
	if n.Secret != "" && len(n.Secret) < MinSecretLen {
		v.add("notify.secret", "too short: at least %d characters", MinSecretLen)
	}
}
