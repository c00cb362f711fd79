package driver

import (
	"errors"
	"reflect"
	"testing"

	nomadapi "github.com/hashicorp/nomad/api"

	"github.com/rubberband-hpo/rubberband/executor/cloud/nomadlocal"
)

// A team's cluster is reached as the nomad CLI reaches it, from the same variables; the agents
// rubberband starts for it join with the same files, with ACLs when there is a token. A
// half-given certificate and an unreadable NOMAD_SKIP_VERIFY are usage errors.
func TestTeamNomadConfig(t *testing.T) {
	env := map[string]string{"NOMAD_ADDR": "https://nomad.example:4646", "NOMAD_REGION": "eu", "NOMAD_NAMESPACE": "ml",
		"NOMAD_TOKEN": "secret", "NOMAD_HTTP_AUTH": "u:p:w", "NOMAD_CACERT": "/ca.pem", "NOMAD_CAPATH": "/cas",
		"NOMAD_CLIENT_CERT": "/c.pem", "NOMAD_CLIENT_KEY": "/k.pem", "NOMAD_TLS_SERVER_NAME": "server.eu.nomad", "NOMAD_SKIP_VERIFY": "false"}
	getenv := func(k string) string { return env[k] }
	cfg, join, err := teamNomadConfig(getenv)
	if err != nil {
		t.Fatal(err)
	}
	want := nomadapi.TLSConfig{CACert: "/ca.pem", CAPath: "/cas", ClientCert: "/c.pem", ClientKey: "/k.pem", TLSServerName: "server.eu.nomad"}
	if cfg.Address != env["NOMAD_ADDR"] || cfg.Region != "eu" || cfg.Namespace != "ml" || cfg.SecretID != "secret" ||
		!reflect.DeepEqual(*cfg.TLSConfig, want) || cfg.HttpAuth == nil || cfg.HttpAuth.Username != "u" || cfg.HttpAuth.Password != "p:w" {
		t.Fatalf("config %+v, TLS %+v", cfg, cfg.TLSConfig)
	}
	if join != (nomadlocal.Join{TLS: nomadlocal.TLS{CA: "/ca.pem", Cert: "/c.pem", Key: "/k.pem"}, ACL: true}) {
		t.Fatalf("join %+v", join)
	}
	for k, v := range map[string]string{"NOMAD_CLIENT_KEY": "", "NOMAD_SKIP_VERIFY": "maybe"} {
		old := env[k]
		env[k] = v
		if _, _, err := teamNomadConfig(getenv); !errors.Is(err, ErrInput) {
			t.Errorf("%s=%q: %v, want a usage error", k, v, err)
		}
		env[k] = old
	}
	env["NOMAD_TOKEN"] = ""
	if _, join, _ := teamNomadConfig(getenv); join.ACL {
		t.Error("ACLs on without a token")
	}
}
