package slack

import (
	"context"
	"encoding/json"
	"net/http"
	"time"

	"github.com/slack-go/slack/slackevents"
)

// EventsHandler is the Events API endpoint (Event Subscriptions' Request
// URL) of a Slack app without Socket Mode (Config.SigningSecret): Slack
// POSTs the app_mention events there. Each request's signature is checked
// as Handler checks it (401 when bad); url_verification, sent when the
// Request URL is entered, gets its challenge back; an event_callback is
// answered 200 at once (Slack waits three seconds, then retries) and goes
// to the mention handler (HandleMentions) as a Socket Mode one does. A
// retry (X-Slack-Retry-Num) carries the event_id of the first delivery,
// so the run it asks for is started once.
func (s *Surface) EventsHandler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if s.cfg.SigningSecret == "" {
			http.Error(w, "the Events API over HTTP is off (no signing secret)", http.StatusNotFound)
			return
		}
		body, ok := s.signedBody(w, r, "an Events API request")
		if !ok {
			return
		}
		ev, err := slackevents.ParseEvent(json.RawMessage(body), slackevents.OptionNoVerifyToken())
		if err != nil {
			var outer struct {
				Type string `json:"type"`
			}
			if json.Unmarshal(body, &outer) != nil || outer.Type == "" {
				s.log.Warn("refused an Events API request that is not an event", "err", err)
				http.Error(w, "want an Events API JSON body", http.StatusBadRequest)
				return
			}
			// Signed by Slack, but an event this app does not read (one
			// subscribed to by mistake): a 2xx, or Slack retries it.
			s.log.Warn("ignored an Events API event it cannot read", "type", outer.Type, "err", err)
			w.WriteHeader(http.StatusOK)
			return
		}
		switch ev.Type {
		case slackevents.URLVerification:
			uv, ok := ev.Data.(*slackevents.EventsAPIURLVerificationEvent)
			if !ok || uv.Challenge == "" {
				http.Error(w, "url_verification without a challenge", http.StatusBadRequest)
				return
			}
			s.log.Info("Slack verified the Events API request URL")
			w.Header().Set("Content-Type", "text/plain")
			w.Write([]byte(uv.Challenge))
			return
		case slackevents.AppRateLimited:
			s.log.Warn("Slack rate-limits the app's events: some mentions of the last minute were dropped by Slack")
			w.WriteHeader(http.StatusOK)
			return
		case slackevents.CallbackEvent:
		default:
			w.WriteHeader(http.StatusOK)
			return
		}
		if n := r.Header.Get("X-Slack-Retry-Num"); n != "" {
			s.log.Debug("Slack retries an event", "retry", n, "reason", r.Header.Get("X-Slack-Retry-Reason"))
		}
		id := keepable(ev)
		s.mu.Lock()
		h := s.mentions
		s.mu.Unlock()
		if id == "" || h == nil || s.cfg.Inbox == nil {
			w.WriteHeader(http.StatusOK)
			go s.onEventsAPI(ev) // mention.go
			return
		}
		ctx, cancel := context.WithTimeout(r.Context(), keepTimeout)
		err = s.cfg.Inbox.Keep(ctx, id, withoutToken(body))
		cancel()
		if err != nil {
			// Not kept: a 500 makes Slack send it again (X-Slack-Retry-Num).
			s.log.Error("keep a mention before acknowledging it: Slack will retry it", "event", id, "err", s.redact(err))
			http.Error(w, "cannot keep the event just now", http.StatusInternalServerError)
			return
		}
		w.WriteHeader(http.StatusOK)
		go s.workKept(id, ev)
	})
}

// withoutToken is an event's body without its "token" (the app's legacy
// verification token, a secret the store need not hold).
func withoutToken(body []byte) []byte {
	var m map[string]json.RawMessage
	if json.Unmarshal(body, &m) != nil {
		return body
	}
	if _, ok := m["token"]; !ok {
		return body
	}
	delete(m, "token")
	out, err := json.Marshal(m)
	if err != nil {
		return body
	}
	return out
}

// keepTimeout bounds keeping an event before Slack is answered (it waits
// three seconds).
const keepTimeout = 2 * time.Second

// keepable is the event_id of an app_mention event_callback; "" for any
// other event.
func keepable(ev slackevents.EventsAPIEvent) string {
	if ev.Type != slackevents.CallbackEvent || ev.InnerEvent.Type != string(slackevents.AppMention) {
		return ""
	}
	if cb, ok := ev.Data.(*slackevents.EventsAPICallbackEvent); ok {
		return cb.EventID
	}
	return ""
}

// workKept does the work of a kept event, then drops it from the inbox,
// unless the surface closed meanwhile (the work may be cut short): then
// it is done again on the next start.
func (s *Surface) workKept(id string, ev slackevents.EventsAPIEvent) {
	s.onEventsAPI(ev) // mention.go
	if s.ctx.Err() != nil {
		return
	}
	ctx, cancel := context.WithTimeout(s.ctx, keepTimeout)
	defer cancel()
	if err := s.cfg.Inbox.Drop(ctx, id); err != nil {
		s.log.Warn("drop a mention whose work ran from the inbox (it is looked at again on the next start, and starts nothing more)", "event", id, "err", s.redact(err))
	}
}

// replayKept hands the mentions kept in the inbox (acknowledged, their
// work cut by a crash or a shutdown) to the handler again: each starts
// its run once (the handler is keyed by the event), then is dropped.
func (s *Surface) replayKept() {
	ctx, cancel := context.WithTimeout(s.ctx, workTimeout)
	kept, err := s.cfg.Inbox.Kept(ctx)
	cancel()
	if err != nil {
		s.log.Error("list the mentions kept from before a restart", "err", s.redact(err))
		return
	}
	for _, k := range kept {
		if s.ctx.Err() != nil {
			return
		}
		ev, err := slackevents.ParseEvent(json.RawMessage(k.Body), slackevents.OptionNoVerifyToken())
		if err != nil || keepable(ev) != k.Key {
			s.log.Warn("drop a kept event it cannot read", "event", k.Key, "err", err)
			ctx, cancel := context.WithTimeout(s.ctx, keepTimeout)
			s.cfg.Inbox.Drop(ctx, k.Key)
			cancel()
			continue
		}
		s.log.Info("taking a mention acknowledged before a restart", "event", k.Key)
		s.workKept(k.Key, ev)
	}
}

// EventInbox keeps events acknowledged before their work ran (Config.Inbox;
// the orchestrator's store).
type EventInbox interface {
	// Keep keeps body under key; a key kept already changes nothing.
	Keep(ctx context.Context, key string, body []byte) error
	// Drop forgets key: its work ran.
	Drop(ctx context.Context, key string) error
	// Kept lists what is kept, oldest first.
	Kept(ctx context.Context) ([]KeptEvent, error)
}

// KeptEvent is an event kept in an EventInbox: its event_id and the body
// Slack sent.
type KeptEvent struct {
	Key  string
	Body []byte
}
