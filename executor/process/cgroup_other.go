//go:build !linux

package process

import "errors"

type runCgroup struct{ fd int }

func openCgroup(string) (*runCgroup, error) { return nil, errors.New("cgroup: Linux only") }

func (c *runCgroup) remove() error { return nil }

func removeCgroup(string) error { return nil }
