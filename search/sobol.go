package search

import (
	"math/bits"

	"github.com/rubberband-hpo/rubberband/spec"
)

// Sobol is a scrambled Sobol sequence: the digital sequence of Sobol (1967) in base 2, one
// primitive polynomial per dimension (the lowest-degree ones, in order), scrambled as Matoušek
// proposed (a random lower-triangular binary matrix per dimension, then a random digital
// shift), which keeps its stratification: of the first 2^k points, each of the 2^k equal cells
// of any one coordinate holds exactly one. The initial direction numbers are 1 (Bratley and
// Fox's choice where no table is given): the scrambling breaks the correlations that leaves
// between some pairs of high dimensions.
type Sobol struct {
	dirs  [][32]uint32 // scrambled direction numbers, per dimension
	shift []uint32
}

// NewSobol returns the sequence of d dimensions scrambled by seed.
func NewSobol(d int, seed int64) *Sobol {
	r := spec.NewRand(seed, 0x50b01)
	s := &Sobol{dirs: make([][32]uint32, d), shift: make([]uint32, d)}
	polys := primitivePolynomials(max(d-1, 0))
	for j := range d {
		var m [32]uint32 // m[k] for k = 1..32 stored at k-1
		if j == 0 {
			for k := range m {
				m[k] = 1 // van der Corput
			}
		} else {
			p := polys[j-1]
			deg := bits.Len32(p) - 1
			for k := range min(deg, 32) {
				m[k] = 1
			}
			for k := deg; k < 32; k++ {
				v := m[k-deg] ^ m[k-deg]<<deg
				for i := 1; i < deg; i++ {
					if p>>(deg-i)&1 == 1 {
						v ^= m[k-i] << i
					}
				}
				m[k] = v
			}
		}
		// Matoušek's linear scramble: output bit i (from the most significant) is the parity of a
		// random choice of input bits 0..i, always including i itself.
		var rows [32]uint32
		for i := range rows {
			top := uint32(0xffffffff) << (31 - i) // bits 0..i from the top
			rows[i] = (r.Uint32()&top | 1<<(31-i))
		}
		for k := range m {
			v := m[k] << (31 - k) // v_k = m_k / 2^k as a 32-bit fraction
			s.dirs[j][k] = scramble(rows, v)
		}
		s.shift[j] = r.Uint32()
	}
	return s
}

func scramble(rows [32]uint32, x uint32) uint32 {
	var out uint32
	for i, row := range rows {
		out |= uint32(bits.OnesCount32(row&x)&1) << (31 - i)
	}
	return out
}

// Point returns the sequence's point i, coordinates in [0, 1).
func (s *Sobol) Point(i uint32) []float64 {
	u := make([]float64, len(s.dirs))
	g := i ^ i>>1 // Gray code: the point is the XOR of the directions of its set bits
	for j := range s.dirs {
		x := s.shift[j]
		for k := 0; g>>k != 0; k++ {
			if g>>k&1 == 1 {
				x ^= s.dirs[j][k]
			}
		}
		u[j] = float64(x) / (1 << 32)
	}
	return u
}

// primitivePolynomials returns the first n primitive polynomials over GF(2) of degree 1 and
// above, in order of degree and then value, as bit masks (x^3+x+1 is 0b1011); x+1 first.
func primitivePolynomials(n int) []uint32 {
	var out []uint32
	for deg := 1; len(out) < n && deg < 31; deg++ {
		for p := uint32(1)<<deg | 1; p < 1<<(deg+1) && len(out) < n; p += 2 {
			if primitive(p, deg) {
				out = append(out, p)
			}
		}
	}
	return out
}

// primitive says whether the polynomial p of degree deg generates the multiplicative group of
// GF(2^deg): x's order modulo p is 2^deg - 1.
func primitive(p uint32, deg int) bool {
	if deg == 1 {
		return p == 0b11
	}
	order := uint64(1)<<deg - 1
	if powX(order, p, deg) != 1 {
		return false
	}
	for _, q := range primeFactors(order) {
		if powX(order/q, p, deg) == 1 {
			return false
		}
	}
	return true
}

// powX is x^e modulo p.
func powX(e uint64, p uint32, deg int) uint32 {
	result, base := uint32(1), uint32(2)%p
	if deg == 1 {
		base = 1
	}
	for ; e > 0; e >>= 1 {
		if e&1 == 1 {
			result = mulMod(result, base, p, deg)
		}
		base = mulMod(base, base, p, deg)
	}
	return result
}

// mulMod multiplies two polynomials over GF(2) modulo p (of degree deg).
func mulMod(a, b, p uint32, deg int) uint32 {
	var out uint32
	for ; b != 0; b >>= 1 {
		if b&1 == 1 {
			out ^= a
		}
		a <<= 1
		if a>>deg&1 == 1 {
			a ^= p
		}
	}
	return out
}

func primeFactors(n uint64) []uint64 {
	var out []uint64
	for q := uint64(2); q*q <= n; q++ {
		if n%q == 0 {
			out = append(out, q)
			for n%q == 0 {
				n /= q
			}
		}
	}
	if n > 1 {
		out = append(out, n)
	}
	return out
}
