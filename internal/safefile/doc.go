// Package safefile reads files a user names (a spec, a profile, a plan) without trusting them:
// only regular files, and only up to a size limit, both checked before anything is read, since
// opening a FIFO blocks, /dev/zero never ends and a wrong path can name a disk image.
package safefile
