package secretscan

import (
	"strings"
	"testing"
)

// The secrets below are built from parts at test time: no realistic token
// is written whole in a fixture.
func rep(s string, n int) string { return strings.Repeat(s, n) }

// mixed is n characters of a high-entropy alphanumeric run.
func mixed(n int) string {
	const alphabet = "aZ3kQ9xB7mT2wR5pL8vN4cH6jF1dS0gY"
	var b strings.Builder
	for i := 0; i < n; i++ {
		b.WriteByte(alphabet[(i*7+3)%len(alphabet)])
	}
	return b.String()
}

func pemKey(kind string) string {
	return "-----BEGIN " + kind + "PRIVATE KEY-----\n" + rep(mixed(64)+"\n", 3) + "-----END " + kind + "PRIVATE KEY-----\n"
}

type ruleCase struct {
	kind     string
	positive string // holds one secret of kind, on line 2
	secret   string // the value in positive
	negative string // looks alike, holds none
}

func ruleCases() []ruleCase {
	gh := "ghp" + "_" + mixed(36)
	pat := "github" + "_pat_" + mixed(22) + "_" + mixed(59)
	ant := "sk-" + "ant-" + "api03-" + mixed(40)
	disc := mixed(24) + "." + mixed(6) + "." + mixed(27)
	akid := "AKIA" + "QW3RT5Y7U2IOPASD"
	awsSecret := mixed(20) + "/" + mixed(19)
	gcpKey := `"private_key": "-----BEGIN PRIVATE KEY-----\n` + mixed(70) + `\n-----END PRIVATE KEY-----\n"`
	pk := pemKey("RSA ")
	gapi := "AIza" + mixed(35)
	azKey := mixed(86) + "=="
	azAD := "abc" + "8Q~" + mixed(32)
	slack := "xox" + "b-" + "1234567890-" + mixed(24)
	xapp := "xa" + "pp-1-A0123456789-" + "1234567890-" + mixed(32)
	hook := "hooks.slack.com/services/" + mixed(44)
	stripe := "sk" + "_live_" + mixed(24)
	glpat := "glpat" + "-" + mixed(20)
	npm := "npm" + "_" + mixed(36)
	openai := "sk-" + "proj-" + mixed(24) + "T3Blbk" + "FJ" + mixed(24)
	urlPass := mixed(16)
	generic := mixed(32)
	return []ruleCase{
		{"GCP service account key", "{\n  " + gcpKey + ",\n  \"type\": \"service_account\"\n}", gcpKey, `{"private_key": "", "type": "service_account"}`},
		{"private key", "key:\n" + pk, pk, "-----BEGIN RSA PRIVATE KEY-----\n(put your key here)\n"},
		{"GitHub token", "x\nTOKEN=" + gh + "\n", gh, "TOKEN=ghp_short\nref: gho_ and ghs_ prefixes\n"},
		{"GitHub token", "x\n" + pat + "\n", pat, "github_pat_ is the prefix\n"},
		{"Anthropic API key", "x\nkey " + ant + "\n", ant, "sk-ant-x\n"},
		{"Discord bot token", "x\n" + disc + "\n", disc, "version 1.2.3\n"},
		{"AWS access key ID", "x\naws_access_key_id = " + akid + "\n", akid, "aws_access_key_id = AKIA" + "IOSFODNN7EXAMPLE\n"},
		{"AWS secret access key", "x\nAWS_SECRET_ACCESS_KEY=" + awsSecret + "\n", awsSecret,
			"AWS_SECRET_ACCESS_KEY=wJalrXUtnFEMI/K7MDENG/bPxRfiCY" + "EXAMPLEKEY\nAWS_SECRET_ACCESS_KEY=${AWS_SECRET_ACCESS_KEY}\n"},
		{"Google API key", "x\nkey: " + gapi + "\n", gapi, "AIza is how they start\n"},
		{"Azure storage account key", "x\nDefaultEndpointsProtocol=https;AccountName=a;AccountKey=" + azKey + ";\n", azKey, "AccountKey=<your key>;\n"},
		{"Azure AD client secret", "x\nclient = \"" + azAD + "\"\n", azAD, "client = \"abc8Q~\"\n"},
		{"Slack token", "x\n" + slack + "\n", slack, "xoxb- tokens start so\n"},
		{"Slack app-level token", "x\n" + xapp + "\n", xapp, "xapp- tokens start so\n"},
		{"Slack webhook URL", "x\nhttps://" + hook + "\n", hook, "https://hooks.slack.com/services/T000/B000/XXXX\n"},
		{"Stripe key", "x\n" + stripe + "\n", stripe, "sk_live_ keys are secret\n"},
		{"GitLab token", "x\n" + glpat + "\n", glpat, "glpat-short\n"},
		{"npm token", "x\n//registry.npmjs.org/:_authToken=" + npm + "\n", npm, "npm_config_cache=/tmp\n"},
		{"OpenAI API key", "x\n" + openai + "\n", openai, "sk-proj-short\n"},
		{"password in a URL", "x\nDATABASE_URL=postgres://app:" + urlPass + "@db.internal/app\n", urlPass,
			"postgres://user:password@localhost/app\npostgres://app:${PGPASSWORD}@db/app\n"},
		{"secret assigned to a name such as key, token or password", "x\nclient_secret = \"" + generic + "\"\n", generic,
			"password = os.Getenv(\"DB_PASSWORD\")\nsecret_key: aaaaaaaaaaaaaaaaaaaaaaaaaaaaaa1\ntoken: this_is_not_a_secret_at_all\n"},
	}
}

func TestEachRuleFindsItsShapeAndNotALookalike(t *testing.T) {
	covered := map[string]bool{}
	for _, c := range ruleCases() {
		covered[c.kind] = true
		t.Run(c.kind, func(t *testing.T) {
			got := Scan([]byte(c.positive))
			if len(got) != 1 || got[0].Kind != c.kind || got[0].Line != 2 {
				t.Fatalf("Scan(positive) = %v, want one %q at line 2", got, c.kind)
			}
			if strings.Contains(got[0].String(), c.secret) {
				t.Fatalf("Match.String() holds the secret: %s", got[0])
			}
			if got := Scan([]byte(c.negative)); len(got) != 0 {
				t.Fatalf("Scan(negative) = %v, want none", got)
			}
			f := Finding{Path: "config.env", Line: got[0].Line, Kind: got[0].Kind}
			if s := f.String(); strings.Contains(s, c.secret) || s != "config.env line 2: "+c.kind {
				t.Fatalf("Finding.String() = %q", s)
			}
			if r := Redact(c.positive); strings.Contains(r, c.secret) || !strings.Contains(r, "[REDACTED]") {
				t.Fatalf("Redact left the secret: %q", r)
			}
		})
	}
	for _, r := range rules {
		if !covered[r.Kind] {
			t.Errorf("rule %q has no test case", r.Kind)
		}
	}
}

func TestScanChangeLeavesOutWhatWasThere(t *testing.T) {
	old := "TOKEN=" + "ghp" + "_" + mixed(36) + "\n"
	added := "NEW=" + "glpat" + "-" + mixed(20) + "\n"
	if got := ScanChange([]byte(old), []byte("# header\n"+old)); len(got) != 0 {
		t.Fatalf("a secret the file held before: %v", got)
	}
	got := ScanChange([]byte(old), []byte(old+added))
	if len(got) != 1 || got[0].Kind != "GitLab token" || got[0].Line != 2 {
		t.Fatalf("ScanChange = %v", got)
	}
}

func TestOneFindingPerSecret(t *testing.T) {
	// GITHUB_TOKEN=ghp_… is a GitHub token, not also a generic assignment.
	got := Scan([]byte("GITHUB_TOKEN=" + "ghp" + "_" + mixed(36) + "\n"))
	if len(got) != 1 || got[0].Kind != "GitHub token" {
		t.Fatalf("Scan = %v", got)
	}
}

func TestBinaryIsNotScanned(t *testing.T) {
	if got := Scan([]byte("\x00\x01" + "ghp" + "_" + mixed(36))); len(got) != 0 {
		t.Fatalf("Scan(binary) = %v", got)
	}
}

func TestFindingString(t *testing.T) {
	tok := "ghp" + "_" + mixed(36)
	for _, c := range []struct {
		f    Finding
		want string
	}{
		{Finding{Path: "big.bin", Kind: KindOversized, Size: 3 << 20, Limit: 1 << 20}, "big.bin: file over the size limit (3 MiB, limit 1 MiB)"},
		{Finding{Path: "a.env", Line: 3, Kind: "GitHub token"}, "a.env line 3: GitHub token"},
		{Finding{Path: "dir/" + tok + "\n.env", Line: 1, Kind: "GitHub token"}, `dir/[REDACTED]\n.env line 1: GitHub token`},
	} {
		if got := c.f.String(); got != c.want {
			t.Errorf("String() = %q, want %q", got, c.want)
		}
	}
	if s := Size(1536); s != "1.5 KiB" {
		t.Errorf("Size(1536) = %q", s)
	}
	err := &Error{Findings: []Finding{{Path: "a", Line: 1, Kind: "x"}, {Path: "b", Line: 2, Kind: "y"}}}
	if !strings.Contains(err.Error(), "a line 1: x; b line 2: y") {
		t.Errorf("Error() = %q", err.Error())
	}
}

// BenchmarkScan scans 1 MiB of source-like text without secrets, the
// common case of a run's changed file.
func BenchmarkScan(b *testing.B) {
	var sb strings.Builder
	for sb.Len() < 1<<20 {
		sb.WriteString("\tif err := s.store.Save(ctx, key, value); err != nil { // token = cfg.Token\n")
		sb.WriteString("\t\treturn fmt.Errorf(\"save %s: %w\", key, err)\n\t}\n")
	}
	content := []byte(sb.String())
	b.SetBytes(int64(len(content)))
	for b.Loop() {
		if m := Scan(content); len(m) != 0 {
			b.Fatal(m)
		}
	}
}

// TestSecretInAShellCommand: a value written by a command (followed by an
// escaped newline, not a real one) is found and redacted too.
func TestSecretInAShellCommand(t *testing.T) {
	v := strings.Repeat("kR7/tW2+", 5)
	cmd := `printf 'AWS_SECRET_ACCESS_KEY=` + v + `\nMODE=prod\n' > config.env`
	if got := Scan([]byte(cmd)); len(got) != 1 || got[0].Kind != "AWS secret access key" {
		t.Fatalf("Scan = %v", got)
	}
	if r := Redact(cmd); strings.Contains(r, v[:12]) {
		t.Fatalf("Redact = %q", r)
	}
}
