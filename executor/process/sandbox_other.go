//go:build !linux

package process

// CanSandbox says trainers cannot be sandboxed but on Linux.
func CanSandbox() error { return ErrNoSandbox }

// EndAll cannot end a sandbox but on Linux.
func (s Sandbox) EndAll() error { return ErrNoSandbox }

func liveUIDs() (map[int]bool, error) { return nil, ErrNoSandbox }
