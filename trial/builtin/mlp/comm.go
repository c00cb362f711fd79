package mlp

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"io"
	"math"
	"net"
	"strconv"
	"time"

	"github.com/rubberband-hpo/rubberband/trial/rbtrain"
)

// comm connects the ranks of a gang in a star through rank 0 at MASTER_ADDR:MASTER_PORT.
type comm struct {
	rank  int
	peers []*peer // rank 0: one per other rank; others: rank 0
	ln    net.Listener
}

type peer struct {
	c net.Conn
	r *bufio.Reader
	w *bufio.Writer
}

func connect(run *rbtrain.Run) (*comm, error) {
	c := &comm{rank: run.Rank}
	if run.WorldSize <= 1 {
		return c, nil
	}
	addr := net.JoinHostPort(run.MasterAddr, strconv.Itoa(run.MasterPort))
	if run.Rank == 0 {
		ln, err := net.Listen("tcp", addr)
		if err != nil {
			return nil, fmt.Errorf("mlp: listen %s: %w", addr, err)
		}
		c.ln = ln
		c.peers = make([]*peer, run.WorldSize-1)
		for range run.WorldSize - 1 {
			ln.(*net.TCPListener).SetDeadline(time.Now().Add(60 * time.Second))
			conn, err := ln.Accept()
			if err != nil {
				return nil, fmt.Errorf("mlp: accept workers: %w", err)
			}
			p := newPeer(conn)
			var rank int32
			if err := binary.Read(p.r, binary.LittleEndian, &rank); err != nil || rank < 1 || int(rank) >= run.WorldSize {
				return nil, fmt.Errorf("mlp: bad hello from a worker (%v)", err)
			}
			c.peers[rank-1] = p
		}
		return c, nil
	}
	deadline := time.Now().Add(60 * time.Second)
	for {
		conn, err := net.Dial("tcp", addr)
		if err == nil {
			p := newPeer(conn)
			c.peers = []*peer{p}
			binary.Write(p.w, binary.LittleEndian, int32(run.Rank))
			return c, p.w.Flush()
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("mlp: reach rank 0 at %s: %w", addr, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func newPeer(c net.Conn) *peer {
	return &peer{c: c, r: bufio.NewReaderSize(c, 1<<16), w: bufio.NewWriterSize(c, 1<<16)}
}

func (p *peer) send(v []float64) error {
	var b [8]byte
	for _, x := range v {
		binary.LittleEndian.PutUint64(b[:], math.Float64bits(x))
		if _, err := p.w.Write(b[:]); err != nil {
			return err
		}
	}
	return p.w.Flush()
}

func (p *peer) recv(v []float64) error {
	var b [8]byte
	for i := range v {
		if _, err := io.ReadFull(p.r, b[:]); err != nil {
			return err
		}
		v[i] = math.Float64frombits(binary.LittleEndian.Uint64(b[:]))
	}
	return nil
}

// AllReduceSum replaces v on every rank by the sum of v over all ranks.
func (c *comm) AllReduceSum(v []float64) error {
	if len(c.peers) == 0 {
		return nil
	}
	if c.rank != 0 {
		if err := c.peers[0].send(v); err != nil {
			return fmt.Errorf("mlp: send gradient: %w", err)
		}
		return c.peers[0].recv(v)
	}
	buf := make([]float64, len(v))
	for _, p := range c.peers {
		if err := p.recv(buf); err != nil {
			return fmt.Errorf("mlp: receive gradient: %w", err)
		}
		for i := range v {
			v[i] += buf[i]
		}
	}
	for _, p := range c.peers {
		if err := p.send(v); err != nil {
			return fmt.Errorf("mlp: send sum: %w", err)
		}
	}
	return nil
}

// Broadcast replaces v on every rank by rank 0's.
func (c *comm) Broadcast(v []float64) error {
	if len(c.peers) == 0 {
		return nil
	}
	if c.rank != 0 {
		return c.peers[0].recv(v)
	}
	for _, p := range c.peers {
		if err := p.send(v); err != nil {
			return fmt.Errorf("mlp: broadcast: %w", err)
		}
	}
	return nil
}

func (c *comm) Close() {
	for _, p := range c.peers {
		p.c.Close()
	}
	if c.ln != nil {
		c.ln.Close()
	}
}
