package trial

import (
	"slices"
	"testing"
)

func TestInheritedEnvKeepsOnlyTheAllowlist(t *testing.T) {
	in := []string{"PATH=/usr/bin", "AWS_SECRET_ACCESS_KEY=sentinel", "LC_ALL=C", "PGPASSWORD=pw", "RB_TIME_SCALE=0.5",
		"HOME=/root", "AWS_ACCESS_KEY_ID=AKIA", "RUBBERBAND_DB=postgres://u:pw@h/db", "NCCL_SOCKET_IFNAME=eth0",
		"GITHUB_TOKEN=t", "LD_PRELOAD=/x.so", "MALFORMED", "CUDA_HOME=/usr/local/cuda", "PATHX=1"}
	got := InheritedEnv(in)
	want := []string{"PATH=/usr/bin", "LC_ALL=C", "RB_TIME_SCALE=0.5", "HOME=/root", "NCCL_SOCKET_IFNAME=eth0", "CUDA_HOME=/usr/local/cuda"}
	if !slices.Equal(got, want) {
		t.Fatalf("InheritedEnv = %q, want %q", got, want)
	}
}

func TestInheritedEnvKeepsTheDeclaredTrainerEnv(t *testing.T) {
	in := []string{"AWS_SECRET_ACCESS_KEY=sentinel", "WANDB_API_KEY=declared", TrainerEnvVar + "=WANDB_API_KEY,OTHER", "MASTER_ADDR=10.0.0.1"}
	got := InheritedEnv(in)
	want := []string{"WANDB_API_KEY=declared", TrainerEnvVar + "=WANDB_API_KEY,OTHER", "MASTER_ADDR=10.0.0.1"}
	if !slices.Equal(got, want) {
		t.Fatalf("InheritedEnv = %q, want %q", got, want)
	}
}
