package fakeapi

// OfflineEnv returns the environment variables that point the Claude Code CLI
// at the fake API at baseURL and keep it off the network: a throwaway home
// directory, a fake API key, no telemetry, error reports, update checks or
// other nonessential traffic, and no retries of failed API calls.
//
// It is only these variables: the caller adds what else the child needs
// (PATH, for one) and must leave out the parent's CLAUDECODE and
// CLAUDE_CODE_ENTRYPOINT, with which the CLI refuses to start.
func OfflineEnv(baseURL, home string) map[string]string {
	return map[string]string{
		"HOME":               home,
		"ANTHROPIC_BASE_URL": baseURL,
		"ANTHROPIC_API_KEY":  "fake-key",
		"CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
		"DISABLE_TELEMETRY":                        "1",
		"DISABLE_AUTOUPDATER":                      "1",
		"DISABLE_ERROR_REPORTING":                  "1",
		"CLAUDE_CODE_MAX_RETRIES":                  "0",
	}
}
