package eval

import (
	"math"
	"testing"
	"time"
)

func TestWilson(t *testing.T) {
	// References: Newcombe (1998), "Two-sided confidence intervals for the
	// single proportion", Statistics in Medicine 17:857–872, table I,
	// method 3 (81/263, 15/148, 0/20, 1/29 given to four places there);
	// 8/10 is statsmodels' proportion_confint(8, 10, method="wilson").
	tests := []struct {
		name   string
		k, n   int
		lo, hi float64
		places float64
	}{
		{"newcombe 81/263", 81, 263, 0.2553, 0.3662, 1e-4},
		{"newcombe 15/148", 15, 148, 0.0624, 0.1605, 1e-4},
		{"newcombe 0/20", 0, 20, 0, 0.1611, 1e-4},
		{"newcombe 1/29", 1, 29, 0.0061, 0.1718, 1e-4},
		{"statsmodels 8/10", 8, 10, 0.49016247153664183, 0.9433178485456247, 1e-12},
		{"all right", 10, 10, 0.7224672001371107, 1, 1e-12},
		{"no trials", 0, 0, 0, 1, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			lo, hi := Wilson(tc.k, tc.n)
			if math.Abs(lo-tc.lo) > tc.places/2+1e-15 || math.Abs(hi-tc.hi) > tc.places/2+1e-15 {
				t.Errorf("Wilson(%d, %d) = [%.6f, %.6f], want [%.6f, %.6f]", tc.k, tc.n, lo, hi, tc.lo, tc.hi)
			}
		})
	}
}

func TestMcNemar(t *testing.T) {
	// Exact values: twice the binomial(b+c, 1/2) tail at min(b, c).
	tests := []struct {
		b, c int
		want float64
	}{
		{5, 2, 58.0 / 128},           // 2·(1+7+21)/2^7
		{2, 5, 58.0 / 128},           // symmetric
		{4, 0, 2.0 / 16},             // 2·1/2^4
		{1, 9, 22.0 / 1024},          // 2·(1+10)/2^10
		{20, 5, 136812.0 / 33554432}, // 2·Σ_{i≤5} C(25,i)/2^25
		{10, 10, 1},                  // capped
		{3, 3, 1},
		{0, 0, 1}, // no discordant pair
		{1, 0, 1},
	}
	for _, tc := range tests {
		if got := McNemar(tc.b, tc.c); math.Abs(got-tc.want) > 1e-12 {
			t.Errorf("McNemar(%d, %d) = %.15f, want %.15f", tc.b, tc.c, got, tc.want)
		}
	}
}

func TestPercentile(t *testing.T) {
	ms := func(v ...int) []time.Duration {
		out := make([]time.Duration, len(v))
		for i, x := range v {
			out[i] = time.Duration(x) * time.Millisecond
		}
		return out
	}
	tests := []struct {
		name string
		in   []time.Duration
		p    float64
		want time.Duration
	}{
		{"none", nil, 50, 0},
		{"one", ms(7), 95, 7 * time.Millisecond},
		{"median of four is the second", ms(40, 10, 30, 20), 50, 20 * time.Millisecond},
		{"p95 of twenty is the nineteenth", ms(20, 19, 18, 17, 16, 15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1), 95, 19 * time.Millisecond},
		{"p95 of ten is the largest", ms(1, 2, 3, 4, 5, 6, 7, 8, 9, 10), 95, 10 * time.Millisecond},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := Percentile(tc.in, tc.p); got != tc.want {
				t.Errorf("Percentile(%v, %v) = %v, want %v", tc.in, tc.p, got, tc.want)
			}
		})
	}
}
