package fakeapi_test

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"

	"github.com/orchestrator-dev/orchestrator/internal/fakeapi"
)

func ExampleNew() {
	f := fakeapi.New(
		// A rate limit for the first request that mentions "deploy"...
		fakeapi.Rule{When: "deploy", Reply: fakeapi.Reply{Status: 429}, Times: 1},
		// ...then a tool call for it.
		fakeapi.Rule{When: "deploy", Reply: fakeapi.Reply{
			Text:    "Deploying.",
			ToolUse: &fakeapi.ToolUse{Name: "Bash", Input: map[string]any{"command": "make deploy"}},
		}},
	)
	ts := httptest.NewServer(f)
	defer ts.Close()
	defer f.Close()

	// The real CLI gets ts.URL as ANTHROPIC_BASE_URL (see OfflineEnv); here
	// plain HTTP stands in for it.
	body := `{"model":"claude-test","stream":true,"messages":[{"role":"user","content":"please deploy"}]}`
	for range 3 {
		resp, err := http.Post(ts.URL+"/v1/messages?beta=true", "application/json", strings.NewReader(body))
		if err != nil {
			fmt.Println(err)
			return
		}
		events, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		fmt.Println(resp.StatusCode, strings.Contains(string(events), `"stop_reason":"tool_use"`))
	}
	fmt.Println(len(f.Requests()), "requests, the last one said:", f.Requests()[2].LastUserText)
	// Output:
	// 429 false
	// 200 true
	// 200 true
	// 3 requests, the last one said: please deploy
}
