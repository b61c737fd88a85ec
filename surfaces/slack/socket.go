package slack

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/slack-go/slack"
	"github.com/slack-go/slack/slackevents"
	"github.com/slack-go/slack/socketmode"
)

// fatalAuth are the errors of apps.connections.open that no retry mends.
var fatalAuth = map[string]bool{"invalid_auth": true, "not_authed": true, "account_inactive": true, "token_revoked": true, "not_allowed_token_type": true}

// runSocket keeps a Socket Mode connection open until the surface closes:
// slack-go reconnects after a disconnect envelope or a dropped connection;
// when it gives up, this loop starts it again after a backoff, unless the
// app token was refused.
func (s *Surface) runSocket() {
	defer close(s.stopped)
	events := make(chan struct{})
	go func() {
		defer close(events)
		s.consume()
	}()
	backoff := time.Second
	for {
		err := s.smc.RunContext(s.ctx)
		if s.ctx.Err() != nil {
			<-events
			return
		}
		if fatalAuth[err.Error()] {
			s.mu.Lock()
			s.fatal = fmt.Errorf("slack: Socket Mode refused the app token (%s): check surfaces.slack.app_token", err.Error())
			s.mu.Unlock()
			close(s.fatalCh)
			s.log.Error("Socket Mode refused the app token", "err", err.Error())
			<-s.ctx.Done()
			<-events
			return
		}
		s.setHealth(fmt.Errorf("slack: Socket Mode is not connected: %w", s.redact(err)))
		s.log.Warn("Socket Mode connection lost, reconnecting", "err", s.redact(err), "in", backoff)
		t := time.NewTimer(backoff)
		select {
		case <-t.C:
		case <-s.ctx.Done():
			t.Stop()
			<-events
			return
		}
		backoff = min(2*backoff, time.Minute)
	}
}

// consume handles the Socket Mode client's events until the surface
// closes. Envelopes are acknowledged at once; their work runs on a
// goroutine of its own.
func (s *Surface) consume() {
	for {
		var evt socketmode.Event
		select {
		case <-s.ctx.Done():
			return
		case evt = <-s.smc.Events:
		}
		switch evt.Type {
		case socketmode.EventTypeConnected:
			s.setHealth(nil)
			s.mu.Lock()
			select {
			case <-s.connected:
			default:
				close(s.connected)
			}
			s.mu.Unlock()
			s.log.Debug("Socket Mode connected")
		case socketmode.EventTypeDisconnect:
			s.log.Info("Slack asked to reconnect")
		case socketmode.EventTypeConnectionError:
			if ce, ok := evt.Data.(*slack.ConnectionErrorEvent); ok {
				s.setHealth(fmt.Errorf("slack: cannot connect to Socket Mode: %w", s.redact(ce.ErrorObj)))
				s.log.Warn("cannot connect to Socket Mode", "attempt", ce.Attempt, "err", s.redact(ce.ErrorObj))
			}
		case socketmode.EventTypeInvalidAuth:
			s.setHealth(errors.New("slack: Socket Mode refused the app token"))
		case socketmode.EventTypeInteractive:
			if evt.Request == nil {
				continue
			}
			s.ack(evt.Request)
			cb, ok := evt.Data.(slack.InteractionCallback)
			if !ok {
				continue
			}
			go s.onInteraction(cb)
		case socketmode.EventTypeEventsAPI:
			if evt.Request != nil {
				s.ack(evt.Request)
			}
			if ev, ok := evt.Data.(slackevents.EventsAPIEvent); ok {
				go s.onEventsAPI(ev) // mention.go
			}
		case socketmode.EventTypeSlashCommand:
			if evt.Request != nil {
				s.ack(evt.Request)
			}
		}
	}
}

// ack acknowledges an envelope: Slack waits three seconds for it.
func (s *Surface) ack(req *socketmode.Request) {
	ctx, cancel := context.WithTimeout(s.ctx, 2*time.Second)
	defer cancel()
	if err := s.smc.AckCtx(ctx, req.EnvelopeID, nil); err != nil {
		s.log.Warn("acknowledge an envelope", "envelope", req.EnvelopeID, "err", s.redact(err))
	}
}
