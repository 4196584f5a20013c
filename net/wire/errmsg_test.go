package wire

import (
	"strings"
	"testing"
	"unicode/utf8"
)

// Error messages longer than MaxErrorMessageBytes are cut at a rune boundary and marked; short
// ones and nil go out unchanged.
func TestErrorMessageIsCut(t *testing.T) {
	long := "a" + strings.Repeat("é", 40000) // 80,001 bytes: over the int16 prefix; 2-byte runes at odd offsets
	for _, tc := range []struct {
		name string
		in   *string
	}{
		{"nil", nil},
		{"short", new("retention.ms: \"soon\" is not an integer")},
		{"exactly the bound", new(strings.Repeat("a", MaxErrorMessageBytes))},
		{"long", &long},
		{"long ascii", new(strings.Repeat("b", 1<<16))},
	} {
		t.Run(tc.name, func(t *testing.T) {
			enc := (&TopicResult{Topic: "t", ErrorMessage: tc.in}).appendTo(nil)
			var got TopicResult
			r := reader{b: enc}
			got.readFrom(&r)
			if r.err != nil || len(r.b) != 0 {
				t.Fatalf("decode: %v, %d bytes left", r.err, len(r.b))
			}
			switch {
			case tc.in == nil:
				if got.ErrorMessage != nil {
					t.Fatalf("nil came back as %q", *got.ErrorMessage)
				}
			case len(*tc.in) <= MaxErrorMessageBytes:
				if got.ErrorMessage == nil || *got.ErrorMessage != *tc.in {
					t.Fatal("a short message changed")
				}
			default:
				m := *got.ErrorMessage
				if len(m) > MaxErrorMessageBytes || !utf8.ValidString(m) || !strings.HasSuffix(m, " [cut]") ||
					!strings.HasPrefix(*tc.in, strings.TrimSuffix(m, " [cut]")) || len(m) < MaxErrorMessageBytes-8 {
					t.Fatalf("cut message: %d bytes, valid UTF-8 %v, suffix %q", len(m), utf8.ValidString(m), m[max(0, len(m)-10):])
				}
			}
		})
	}
}
