package bench

import (
	"context"
	"strings"
	"testing"
)

// CompareFrom runs the systems round from the one given and returns the rows in the systems'
// order, with ratios to the first system whatever ran first.
func TestCompareFromRotates(t *testing.T) {
	var ran []string
	sys := func(name string) System {
		return System{Name: name, Open: func(context.Context) (Driver, error) { ran = append(ran, name); return newMemDriver(), nil }}
	}
	rates := map[string]float64{"a": 100, "b": 50, "c": 200}
	systems := []System{sys("a"), sys("b"), sys("c")}
	run := func(context.Context, Driver) (Result, error) {
		return Result{RecordsPerSec: rates[ran[len(ran)-1]]}, nil
	}
	rows := CompareFrom(context.Background(), systems, 1, run, nil)
	if strings.Join(ran, "") != "bca" {
		t.Errorf("ran %v, want b, c, a", ran)
	}
	if len(rows) != 3 || rows[0].System != "a" || rows[1].System != "b" || rows[2].System != "c" {
		t.Fatalf("rows %+v, want a, b, c", rows)
	}
	if rows[0].Ratio != 1 || rows[1].Ratio != 0.5 || rows[2].Ratio != 2 {
		t.Errorf("ratios %v %v %v, want 1, 0.5, 2 (to a)", rows[0].Ratio, rows[1].Ratio, rows[2].Ratio)
	}
	// A cancelled comparison has rows only for the systems that ran, and no ratios without a.
	ran = nil
	ctx, cancel := context.WithCancel(context.Background())
	rows = CompareFrom(ctx, systems, 1, func(context.Context, Driver) (Result, error) {
		cancel()
		return Result{RecordsPerSec: 50}, nil
	}, nil)
	if len(rows) != 1 || rows[0].System != "b" || rows[0].Ratio != 0 {
		t.Errorf("after cancelling during b: rows %+v", rows)
	}
	if len(CompareFrom(context.Background(), nil, 3, run, nil)) != 0 {
		t.Error("no systems: want no rows")
	}
}
