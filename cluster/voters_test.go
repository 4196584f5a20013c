package cluster

import (
	"strings"
	"testing"
)

func TestParseVoters(t *testing.T) {
	vs, err := ParseVoters("2@127.0.0.1:9293, 0@127.0.0.1:9093,1@localhost:9193")
	if err != nil {
		t.Fatal(err)
	}
	if got, want := FormatVoters(vs), "0@127.0.0.1:9093,1@localhost:9193,2@127.0.0.1:9293"; got != want {
		t.Fatalf("parsed %q, want %q", got, want)
	}
	for _, tc := range []struct{ in, msg string }{
		{"", "empty"},
		{"0@127.0.0.1", "0@127.0.0.1"},
		{"127.0.0.1:9093", "want id@host:port"},
		{"x@127.0.0.1:9093", `node id "x"`},
		{"-1@127.0.0.1:9093", `node id "-1"`},
		{"0@127.0.0.1:0", `port "0"`},
		{"0@127.0.0.1:70000", `port "70000"`},
		{"0@:9093", "no host"},
		{"0@127.0.0.1:9093,0@127.0.0.1:9193", "node id 0 is named twice"},
		{"0@127.0.0.1:9093,1@127.0.0.1:9093", "address 127.0.0.1:9093 is named twice"},
	} {
		_, err := ParseVoters(tc.in)
		if err == nil || !strings.Contains(err.Error(), tc.msg) {
			t.Errorf("ParseVoters(%q) = %v, want an error containing %q", tc.in, err, tc.msg)
		}
	}
}
