package discordtest

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/bwmarrin/discordgo"
)

// post sends body to the fake's REST path (as the bot when auth) and
// returns the status and Discord's error code.
func post(t *testing.T, s *Server, method, path string, body any, auth bool) (int, int) {
	t.Helper()
	b, err := json.Marshal(body)
	if err != nil {
		t.Fatal(err)
	}
	req, err := http.NewRequestWithContext(context.Background(), method, s.URL+"/api/v10"+path, bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	if auth {
		req.Header.Set("Authorization", "Bot "+s.token)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	var e struct {
		Code int `json:"code"`
	}
	json.NewDecoder(res.Body).Decode(&e)
	return res.StatusCode, e.Code
}

// TestInteractionDeadlines: as on Discord, an interaction is answered
// within 3 s of the click or never (404, 10062), once (400, 40060), and
// its token serves follow-ups for 15 min (then 404, 10015).
func TestInteractionDeadlines(t *testing.T) {
	s := NewServer(t)
	msg := map[string]any{"content": "q", "components": []any{map[string]any{"type": 1, "components": []any{
		map[string]any{"type": 2, "style": 1, "label": "Yes", "custom_id": "yes"}}}}}
	if code, _ := post(t, s, http.MethodPost, "/channels/"+ChannelID+"/messages", msg, true); code != http.StatusOK {
		t.Fatalf("post message: HTTP %d", code)
	}
	m := s.Messages(ChannelID)[0]
	u := User{ID: "3000000000000000001", Name: "alice"}
	ack := map[string]any{"type": discordgo.InteractionResponseDeferredMessageUpdate}
	callback := func(id string) string { return "/interactions/" + id + "/itok" + id + "/callback" }

	late, err := s.ClickButton(u, m.ID, "Yes")
	if err != nil {
		t.Fatal(err)
	}
	s.Advance(InteractionDeadline + time.Second)
	if code, dc := post(t, s, http.MethodPost, callback(late), ack, false); code != http.StatusNotFound || dc != 10062 {
		t.Errorf("response after 4s: HTTP %d, code %d; want 404, 10062", code, dc)
	}

	id, err := s.ClickButton(u, m.ID, "Yes")
	if err != nil {
		t.Fatal(err)
	}
	if code, _ := post(t, s, http.MethodPost, callback(id), ack, false); code != http.StatusNoContent {
		t.Errorf("response in time: HTTP %d, want 204", code)
	}
	if code, dc := post(t, s, http.MethodPost, callback(id), ack, false); code != http.StatusBadRequest || dc != 40060 {
		t.Errorf("second response: HTTP %d, code %d; want 400, 40060", code, dc)
	}
	followup := "/webhooks/" + AppID + "/itok" + id
	if code, _ := post(t, s, http.MethodPost, followup, map[string]any{"content": "ok"}, false); code != http.StatusOK {
		t.Errorf("follow-up in time: HTTP %d, want 200", code)
	}
	s.Advance(TokenLifetime)
	if code, dc := post(t, s, http.MethodPost, followup, map[string]any{"content": "late"}, false); code != http.StatusNotFound || dc != 10015 {
		t.Errorf("follow-up after 15 min: HTTP %d, code %d; want 404, 10015", code, dc)
	}
}
