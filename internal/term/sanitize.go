package term

import "io"

// maxString bounds an escape sequence that carries a string (OSC, DCS, APC, PM, SOS): one that
// never ends must not hide the rest of the output.
const maxString = 4 << 10

// Sanitizer writes what is written to it without terminal escape sequences (CSI, OSC, DCS and
// the other ESC sequences), C1 controls (8-bit, as UTF-8) or other control characters but the
// newline and the tab: a log shown on a terminal cannot move its cursor, retitle it, rewrite
// what was printed or answer for the user. Sequences split across writes are removed whole.
// Removed counts what was removed (each sequence or character once).
type Sanitizer struct {
	W       io.Writer
	Removed int

	state state
	n     int  // bytes of the current string sequence
	c2    bool // the last byte was 0xC2, the lead byte of a C1 control in UTF-8
	buf   []byte
}

type state int

const (
	text         state = iota
	escape             // after ESC
	intermediate       // ESC and bytes 0x20-0x2F: a final byte ends it
	csi                // ESC [ (or C1 CSI): parameters and intermediates, then a final byte
	str                // OSC, DCS, SOS, PM, APC: until BEL or ST (ESC \)
	strEscape          // ESC inside a string sequence
)

// NewSanitizer is a Sanitizer writing to w.
func NewSanitizer(w io.Writer) *Sanitizer { return &Sanitizer{W: w} }

func (s *Sanitizer) Write(p []byte) (int, error) {
	out := s.buf[:0]
	for _, b := range p {
		if s.c2 {
			s.c2 = false
			switch {
			case b >= 0x80 && b <= 0x9f: // a C1 control, as UTF-8
				s.c1(b)
				continue
			case b >= 0xa0 && b <= 0xbf: // a character of U+00A0-U+00BF
				out = append(out, 0xc2)
			default: // not UTF-8: written whole, it could make a C1 control of what follows
				out = append(out, "\uFFFD"...)
			}
		}
		r := s.step(b)
		if r == again { // the byte ended a sequence without being part of it: read it as text
			s.state = text
			r = s.step(b)
		}
		if r == emit {
			out = append(out, b)
		}
	}
	s.buf = out
	if len(out) > 0 {
		if _, err := s.W.Write(out); err != nil {
			return 0, err
		}
	}
	return len(p), nil
}

// keep says whether b, read in text, is text: not a control, nor the start of one.
func (s *Sanitizer) keep(b byte) bool {
	return b == '\n' || b == '\t' || b >= 0x20 && b != 0x7f && b != 0xc2
}

// What step does with a byte.
type result int

const (
	consumed result = iota // part of a sequence or control removed
	emit                   // text
	again                  // it ended a sequence it is no part of: read it again as text
)

// step moves the state machine by b.
func (s *Sanitizer) step(b byte) result {
	switch s.state {
	case text:
		switch {
		case b == 0x1b:
			s.state = escape
			s.Removed++
		case b == 0xc2:
			s.c2 = true
		case s.keep(b):
			return emit
		default: // C0 controls (a bell, a carriage return, a backspace), DEL
			s.Removed++
		}
	case escape:
		switch {
		case b == '[':
			s.state = csi
		case b == ']' || b == 'P' || b == 'X' || b == '^' || b == '_':
			s.state, s.n = str, 0
		case b >= 0x20 && b <= 0x2f:
			s.state = intermediate
		case b >= 0x30 && b <= 0x7e: // a two-byte sequence: ESC 7, ESC c, ...
			s.state = text
		default:
			return again
		}
	case intermediate:
		switch {
		case b >= 0x20 && b <= 0x2f:
		case b >= 0x30 && b <= 0x7e:
			s.state = text
		default:
			return again
		}
	case csi:
		switch {
		case b >= 0x20 && b <= 0x3f: // parameters, intermediates
		case b >= 0x40 && b <= 0x7e: // the final byte
			s.state = text
		default:
			return again
		}
	case str, strEscape:
		s.n++
		switch {
		case b == 0x07 || s.state == strEscape && b == '\\' || s.n > maxString:
			s.state = text
		case b == 0x1b:
			s.state = strEscape
		default:
			s.state = str
		}
	}
	return consumed
}

// c1 removes an 8-bit control: CSI and the string controls start a sequence as their ESC
// forms do.
func (s *Sanitizer) c1(b byte) {
	s.Removed++
	switch b {
	case 0x9b:
		s.state = csi
	case 0x90, 0x98, 0x9d, 0x9e, 0x9f:
		s.state, s.n = str, 0
	}
}
