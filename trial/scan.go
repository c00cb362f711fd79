package trial

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"time"
)

// ScanReports reads a trainer's output to its end: every byte goes to echo (when not nil; its
// errors are ignored, the reports matter more than the log), each report to emit (timed now
// when the line carries no "at"), each malformed or too long report to bad, after the line is
// echoed. Lines of any length are echoed intact; a last line without a line ending gets one.
func ScanReports(r io.Reader, echo io.Writer, emit func(Report), bad func(error)) {
	ScanRuns(r, echo, emit, bad, nil)
}

// ScanRuns reads a reused worker's output as ScanReports does, and calls end (when not nil) with
// the code of each end line (EndPrefix), after the line is echoed.
func ScanRuns(r io.Reader, echo io.Writer, emit func(Report), bad func(error), end func(code int)) {
	if echo == nil {
		echo = io.Discard
	}
	lines := newLineReader(r)
	report := false // the long line being read is a report
	for {
		p, err := lines.next()
		if err != nil {
			return
		}
		echo.Write(p.data)
		if !p.short {
			if p.start {
				report = bytes.HasPrefix(p.data, []byte(ReportPrefix))
			}
			if p.end && report {
				bad(fmt.Errorf("%w: %d bytes, more than MaxReportLine (%d)", ErrReportTooLong, p.size, MaxReportLine))
			}
			continue
		}
		if end != nil && bytes.HasPrefix(p.data, []byte(EndPrefix)) {
			if code, ok := ParseEnd(string(p.data)); ok {
				end(code)
				continue
			}
		}
		rep, err := ParseReport(string(p.data))
		switch {
		case errors.Is(err, ErrNotReport):
		case err != nil:
			bad(err)
		default:
			if rep.At.IsZero() {
				rep.At = time.Now()
			}
			emit(rep)
		}
	}
}

// RelayReports copies a trainer's output r to w, as the worker wrapper does on a remote node,
// stamping each report line with now (StampReport): there reports reach the driver late, through
// logs, and must keep the time they were printed. Every other line passes intact, long ones
// included, as does a report whose stamp would take it over MaxReportLine (the driver then times
// it when it reads it); a last line without a line ending gets one. It reads r to its end even
// after w fails, so that the trainer never blocks on a full pipe, and returns w's first error,
// else r's. Each well-formed report relayed also goes to emit, when not nil (the wrapper keeps
// the last one beside the checkpoint).
func RelayReports(r io.Reader, w io.Writer, now func() time.Time, emit func(Report)) error {
	lines := newLineReader(r)
	var out []byte
	var werr error
	for {
		p, err := lines.next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			if werr == nil {
				return fmt.Errorf("read trainer output: %w", err)
			}
			break
		}
		data := p.data
		if p.short && bytes.HasPrefix(data, []byte(ReportPrefix)) {
			line, ending := data[:p.size], data[p.size:]
			stamped := StampReport(string(line), now())
			if len(stamped) <= MaxReportLine {
				out = append(append(out[:0], stamped...), ending...)
				data = out
			} else {
				stamped = string(line)
			}
			if rep, err := ParseReport(stamped); err == nil && emit != nil {
				emit(rep)
			}
		}
		if werr == nil {
			_, werr = w.Write(data)
		}
	}
	if werr != nil {
		return fmt.Errorf("relay trainer output: %w", werr)
	}
	return nil
}

// lineReader splits a trainer's output into lines in bounded memory, so that one hostile line
// neither stops the reading nor is held whole: a line of at most MaxReportLine bytes (line
// ending excluded) comes whole, a longer one in pieces of about that size.
type lineReader struct {
	br      *bufio.Reader
	n       int    // bytes of the current line read so far
	cr      bool   // the last piece ended in '\r' (a CRLF split between two pieces)
	err     error  // the read error that ends the input, once seen
	partial []byte // the last line, when the input ends without a line ending, and one added
}

// piece is one read of a lineReader. data is valid until the next read; it holds its line's
// ending, if it ends the line.
type piece struct {
	data       []byte
	start, end bool // data starts its line; data ends its line
	short      bool // data is a whole line of at most MaxReportLine bytes, ending excluded
	size       int  // when end: the line's length, ending excluded
}

func newLineReader(r io.Reader) *lineReader {
	return &lineReader{br: bufio.NewReaderSize(r, MaxReportLine+len("\r\n"))}
}

// next returns the next piece of the output, or the error that ended it (io.EOF at its end).
func (l *lineReader) next() (piece, error) {
	if l.err != nil {
		return piece{}, l.err
	}
	data, err := l.br.ReadSlice('\n')
	if err != nil && !errors.Is(err, bufio.ErrBufferFull) {
		l.err = err
		if len(data) == 0 && l.n == 0 {
			return piece{}, err
		}
		l.partial = append(append(l.partial[:0], data...), '\n')
		data = l.partial
	}
	p := piece{data: data, start: l.n == 0, end: data[len(data)-1] == '\n'}
	l.n += len(data)
	if p.end {
		ending := 1
		if bytes.HasSuffix(data, []byte("\r\n")) || (len(data) == 1 && l.cr) {
			ending = 2
		}
		p.size = l.n - ending
		p.short = p.start && p.size <= MaxReportLine
		l.n = 0
	}
	l.cr = data[len(data)-1] == '\r'
	return p, nil
}
