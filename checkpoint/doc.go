// Package checkpoint keeps trials' checkpoints: the Store interface every backend implements
// (file here, S3 in checkpoint/s3), with integrity (sha256 checked on every read) and atomic
// commits, and SaveDir/RestoreDir, which move a trial's checkpoint directory to and from a store,
// keep the last two versions and fall back to the previous one when the newest is corrupt.
package checkpoint
