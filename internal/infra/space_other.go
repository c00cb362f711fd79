//go:build !linux

package infra

// FullBelow is the free space under which a file system counts as full.
const FullBelow = 1 << 20

// Full cannot tell on this system: nil.
func Full(dir string) *Error { return nil }
