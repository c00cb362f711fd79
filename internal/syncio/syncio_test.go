package syncio

import (
	"bytes"
	"strings"
	"sync"
	"testing"
)

// Writes from many goroutines arrive whole, none lost (go test -race checks the rest).
func TestConcurrentWrites(t *testing.T) {
	var plain bytes.Buffer
	w, b := &Writer{W: &plain}, &Buffer{}
	var wg sync.WaitGroup
	for range 50 {
		wg.Go(func() {
			for range 20 {
				w.Write([]byte("line\n"))
				b.Write([]byte("line\n"))
				_ = b.String()
			}
		})
	}
	wg.Wait()
	if n := strings.Count(plain.String(), "line\n"); n != 1000 || plain.Len() != 5000 {
		t.Errorf("Writer: %d whole lines of %d bytes", n, plain.Len())
	}
	if n := strings.Count(b.String(), "line\n"); n != 1000 {
		t.Errorf("Buffer: %d lines", n)
	}
}
