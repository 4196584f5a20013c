package wire

import (
	"fmt"
	"os"
	"strings"
	"testing"
)

// The tables in docs/protocol.md are copies of errorTable and apiTable; these
// tests fail, printing the expected row, when the two drift apart.

func readProtocolDoc(t *testing.T) string {
	b, err := os.ReadFile("../../docs/protocol.md")
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func errorDocRow(e errorInfo) string {
	r := "no"
	if e.retriable {
		r = "yes"
	}
	return fmt.Sprintf("| %d | %s | %s | %s |", e.code, e.name, r, e.message)
}

func apiDocRow(a apiInfo) string {
	if !a.supported {
		return fmt.Sprintf("| %d | %s | reserved |", a.key, a.name)
	}
	return fmt.Sprintf("| %d | %s | %d-%d |", a.key, a.name, a.min, a.max)
}

func TestProtocolDocErrorTable(t *testing.T) {
	doc := readProtocolDoc(t)
	for _, e := range errorTable {
		if row := errorDocRow(e); !strings.Contains(doc, row+"\n") {
			t.Errorf("docs/protocol.md lacks the row:\n%s", row)
		}
	}
}

func TestProtocolDocAPITable(t *testing.T) {
	doc := readProtocolDoc(t)
	for _, a := range apiTable {
		if row := apiDocRow(a); !strings.Contains(doc, row+"\n") {
			t.Errorf("docs/protocol.md lacks the row:\n%s", row)
		}
	}
}
