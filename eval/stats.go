package eval

import (
	"math"
	"slices"
	"time"
)

// z95 is the standard normal quantile of a two-sided 95 % interval.
const z95 = 1.959963984540054

// Wilson returns the 95 % Wilson score interval of k successes in n
// trials. Unlike the normal ("Wald") interval it stays inside [0, 1] and
// is honest at 0 or n successes, which small sets often give. With no
// trials nothing is known: [0, 1].
func Wilson(k, n int) (lo, hi float64) {
	if n <= 0 {
		return 0, 1
	}
	p := float64(k) / float64(n)
	nf := float64(n)
	z2 := z95 * z95
	den := 1 + z2/nf
	mid := (p + z2/(2*nf)) / den
	half := z95 * math.Sqrt(p*(1-p)/nf+z2/(4*nf*nf)) / den
	return max(0, mid-half), min(1, mid+half)
}

// McNemar returns the two-sided p-value of the exact McNemar test for
// paired answers: b items only the first mode got right, c only the
// second. Under the hypothesis that neither is better, each of the b+c
// discordant items is a fair coin; the p-value is twice the smaller tail
// of that binomial, capped at 1. No discordant item gives 1.
func McNemar(b, c int) float64 {
	n := b + c
	if n == 0 {
		return 1
	}
	k := min(b, c)
	// Sum C(n,i)/2^n for i ≤ k in logs: exact enough for any n a run
	// reaches, without overflowing.
	tail := 0.0
	for i := 0; i <= k; i++ {
		tail += math.Exp(logChoose(n, i) - float64(n)*math.Ln2)
	}
	return min(1, 2*tail)
}

func logChoose(n, k int) float64 {
	a, _ := math.Lgamma(float64(n + 1))
	b, _ := math.Lgamma(float64(k + 1))
	c, _ := math.Lgamma(float64(n - k + 1))
	return a - b - c
}

// Percentile returns the p-th percentile (0 < p ≤ 100) of ds by the
// nearest-rank method: the smallest value at least p % of the values do
// not exceed. It is always one of the values measured; 0 for none.
func Percentile(ds []time.Duration, p float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	rank := int(math.Ceil(p / 100 * float64(len(s))))
	return s[min(max(rank, 1), len(s))-1]
}
