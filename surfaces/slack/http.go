package slack

import (
	"encoding/json"
	"io"
	"net/http"
	"net/url"

	"github.com/slack-go/slack"
)

// maxInteractionBody bounds the body of an interactivity request.
const maxInteractionBody = 1 << 20

// Handler is the interactivity endpoint for Slack apps without Socket
// Mode (Config.SigningSecret): Slack POSTs each click and form submission
// there. The request's signature (X-Slack-Signature, its timestamp within
// five minutes) is checked; the request is answered 200 at once (within
// Slack's three seconds), and its work runs after.
func (s *Surface) Handler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if s.cfg.SigningSecret == "" {
			http.Error(w, "interactivity over HTTP is off (no signing secret)", http.StatusNotFound)
			return
		}
		body, ok := s.signedBody(w, r, "an interactivity request")
		if !ok {
			return
		}
		form, err := url.ParseQuery(string(body))
		var cb slack.InteractionCallback
		if err == nil {
			err = json.Unmarshal([]byte(form.Get("payload")), &cb)
		}
		if err != nil {
			http.Error(w, "want a form with a JSON payload", http.StatusBadRequest)
			return
		}
		w.WriteHeader(http.StatusOK) // empty: a modal closes, a click is acknowledged
		go s.onInteraction(cb)
	})
}

// signedBody reads r's body and checks its signature (X-Slack-Signature,
// v0 HMAC-SHA256 of "v0:timestamp:body" with the signing secret, the
// timestamp within five minutes). When it is not ok, it has answered w
// already: 400 for a body it cannot read, 401 for a bad signature.
func (s *Surface) signedBody(w http.ResponseWriter, r *http.Request, what string) ([]byte, bool) {
	body, err := io.ReadAll(io.LimitReader(r.Body, maxInteractionBody+1))
	if err != nil || len(body) > maxInteractionBody {
		http.Error(w, "cannot read the request", http.StatusBadRequest)
		return nil, false
	}
	v, err := slack.NewSecretsVerifier(r.Header, s.cfg.SigningSecret)
	if err == nil {
		v.Write(body)
		err = v.Ensure()
	}
	if err != nil {
		s.log.Warn("refused "+what+" with a bad signature", "err", err)
		http.Error(w, "bad signature", http.StatusUnauthorized)
		return nil, false
	}
	return body, true
}
