package wire

import "testing"

// TestJavaStringHashCode pins String.hashCode values computed by Java (OpenJDK, java H.java), including
// the wrap to MinInt32, a non-ASCII character and one outside the BMP (a surrogate pair).
func TestJavaStringHashCode(t *testing.T) {
	for _, c := range []struct {
		s    string
		want int32
	}{
		{"", 0},
		{"a", 97},
		{"abc", 96354},
		{"hello", 99162322},
		{"Aa", 2112},
		{"BB", 2112},
		{"polygenelubricants", -2147483648},
		{"my-group", -1906497762},
		{"zzzzzzzz", -1910022912},
		{"é", 233},
		{"😀", 1772899},
	} {
		if got := JavaStringHashCode(c.s); got != c.want {
			t.Errorf("hashCode(%q) = %d, want %d", c.s, got, c.want)
		}
	}
}

// TestGroupPartition: Kafka's abs(hashCode) % n, abs(MinInt32) being 0 (not negative).
func TestGroupPartition(t *testing.T) {
	for _, c := range []struct {
		group string
		n     int32
		want  int32
	}{
		{"hello", 50, 99162322 % 50},
		{"polygenelubricants", 50, 0},
		{"my-group", 50, 12}, // Java: Math.abs(hashCode) % 50
		{"a", 50, 47},
		{"😀", 50, 49},
		{"x", 0, 0},
	} {
		if got := GroupPartition(c.group, c.n); got != c.want {
			t.Errorf("GroupPartition(%q, %d) = %d, want %d", c.group, c.n, got, c.want)
		}
	}
	// A negative hash: "zzzzzzzz" wraps below zero in Java; abs of it, mod 50.
	h := JavaStringHashCode("zzzzzzzz")
	if h >= 0 {
		t.Fatalf("hashCode(zzzzzzzz) = %d, expected a negative value for this case", h)
	}
	if got := GroupPartition("zzzzzzzz", 50); got != (-h)%50 {
		t.Errorf("GroupPartition(zzzzzzzz) = %d, want %d", got, (-h)%50)
	}
}
