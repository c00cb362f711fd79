// Package codebundle packs a trainer's folder (trainer.workdir) into a content-addressed
// tar.gz that travels with a run, and unpacks one within bounds. Pack honours the folder's
// .gitignore and .rbignore (globs, dir/, !negation, comments; the root's files only), always
// leaves out the state folder .rubberband and .git, skips links, and refuses a folder over its
// size cap naming the largest files. The bundle's ID is the sha256 of its manifest (every file's
// path, mode and sha256, sorted), not of the compressed bytes, so that any packer (the Go CLI,
// the Python client) names the same folder the same way; Unpack recomputes it from what it
// wrote. Unpack refuses absolute paths, "..", links and devices, and stops at its byte and file
// caps: a bundle is hostile input.
package codebundle
