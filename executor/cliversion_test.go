package executor

import "testing"

func TestParseCLIVersion(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		in     string
		want   string
		tested bool
	}{
		{"2.1.330 (Claude Code)\n", "2.1.330", true},
		{"2.1.332 (Claude Code)", "2.1.332", true},
		{"2.1.331", "2.1.331", true},
		{"1.0.0 (Claude Code)", "1.0.0", false},
		{"2.1.333-beta.1 (Claude Code)", "2.1.333", false},
		{"v2.2.0", "2.2.0", false},
	} {
		v, err := ParseCLIVersion(tc.in)
		if err != nil || v.String() != tc.want || v.Tested() != tc.tested {
			t.Errorf("ParseCLIVersion(%q) = %v, %v, tested %v; want %s, tested %v", tc.in, v, err, v.Tested(), tc.want, tc.tested)
		}
	}
	for _, bad := range []string{"", "Claude Code", "2.1", "2.x.1 (Claude Code)", "-1.2.3"} {
		if v, err := ParseCLIVersion(bad); err == nil {
			t.Errorf("ParseCLIVersion(%q) = %v, want an error", bad, v)
		}
	}
}

func TestTestedRangeParses(t *testing.T) {
	lo, err1 := ParseCLIVersion(TestedCLIOldest)
	hi, err2 := ParseCLIVersion(TestedCLINewest)
	if err1 != nil || err2 != nil || lo.Compare(hi) > 0 {
		t.Fatalf("the tested range %s is not a range: %v %v", TestedCLIRange(), err1, err2)
	}
}
