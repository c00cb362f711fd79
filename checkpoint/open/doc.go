// Package open builds the checkpoint.Store that a spec's checkpoints block names (a directory:
// checkpoint/file; an S3 bucket: checkpoint/s3), and carries that choice to the processes that
// open it elsewhere: a remote worker or an EC2 node agent finds it in its environment (Env,
// FromEnv), never with credentials, which come from the environment or the platform. The driver
// and the worker both use it, and it cannot live in package checkpoint, which its backends
// import.
package open
