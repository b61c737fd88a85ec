package slack

import (
	"encoding/json"
	"net/http"

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
		w.WriteHeader(http.StatusOK)
		go s.onEventsAPI(ev) // mention.go
	})
}
