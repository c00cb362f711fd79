package ec2sim

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net"
	"net/http"
	"path"
	"strconv"
	"strings"
	"time"
)

// imdsServer is one instance's metadata service (IMDSv2: every GET needs a session token).
// Each instance has its own listener, handed to its user-data as
// AWS_EC2_METADATA_SERVICE_ENDPOINT, since every instance sees its own metadata at one address.
type imdsServer struct {
	url    string
	srv    *http.Server
	tokens map[string]time.Time // guarded by Server.mu
}

// maxTokenTTL is IMDSv2's limit on a token's lifetime, in seconds.
const maxTokenTTL = 21600

func (s *Server) startIMDS(in *instance) (*imdsServer, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("listen: %w", err)
	}
	md := &imdsServer{url: "http://" + ln.Addr().String(), tokens: map[string]time.Time{}}
	md.srv = &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.serveIMDS(w, r, in, md)
	}), ReadHeaderTimeout: 10 * time.Second}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		_ = md.srv.Serve(ln)
	}()
	return md, nil
}

func (md *imdsServer) close() {
	if md == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	if md.srv.Shutdown(ctx) != nil {
		_ = md.srv.Close()
	}
}

func (s *Server) serveIMDS(w http.ResponseWriter, r *http.Request, in *instance, md *imdsServer) {
	w.Header().Set("Server", "EC2ws")
	if r.URL.Path == "/latest/api/token" {
		if r.Method != http.MethodPut {
			http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
			return
		}
		ttl, err := strconv.Atoi(r.Header.Get("X-Aws-Ec2-Metadata-Token-Ttl-Seconds"))
		if err != nil || ttl < 1 || ttl > maxTokenTTL {
			http.Error(w, "bad request: X-aws-ec2-metadata-token-ttl-seconds must be 1 to 21600", http.StatusBadRequest)
			return
		}
		tok := fmt.Sprintf("AQAEA%016x%016x==", rand.Uint64(), rand.Uint64())
		s.mu.Lock()
		md.tokens[tok] = time.Now().Add(time.Duration(ttl) * time.Second)
		s.mu.Unlock()
		// The SDK's IMDS client reads the TTL back from this header and fails without it.
		w.Header().Set("X-Aws-Ec2-Metadata-Token-Ttl-Seconds", strconv.Itoa(ttl))
		w.Header().Set("Content-Type", "text/plain")
		_, _ = w.Write([]byte(tok))
		return
	}
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return
	}
	s.mu.Lock()
	exp, ok := md.tokens[r.Header.Get("X-Aws-Ec2-Metadata-Token")]
	body, found := s.metadataLocked(in, r.URL.Path)
	s.mu.Unlock()
	if !ok || time.Now().After(exp) {
		http.Error(w, "unauthorized: IMDSv2 requires a session token (PUT /latest/api/token)", http.StatusUnauthorized)
		return
	}
	if !found {
		http.Error(w, "not found", http.StatusNotFound)
		return
	}
	w.Header().Set("Content-Type", "text/plain")
	_, _ = w.Write([]byte(body))
}

// metadataLocked answers one metadata path for an instance.
func (s *Server) metadataLocked(in *instance, p string) (string, bool) {
	role := profileRole(in.InstanceProfile)
	lifecycle := "on-demand"
	if in.Market == MarketSpot {
		lifecycle = "spot"
	}
	switch p {
	case "/latest/user-data":
		return string(in.UserData), len(in.UserData) > 0
	case "/latest/dynamic/instance-identity/document":
		doc, _ := json.MarshalIndent(map[string]any{
			"accountId": AccountID, "architecture": "x86_64", "availabilityZone": in.AZ,
			"imageId": in.ImageID, "instanceId": in.ID, "instanceType": in.Type,
			"pendingTime": in.LaunchTime.Format(time.RFC3339), "privateIp": "127.0.0.1",
			"region": s.cfg.Region, "version": "2017-09-30",
		}, "", "  ")
		return string(doc), true
	}
	rest, ok := strings.CutPrefix(p, "/latest/meta-data")
	if !ok {
		return "", false
	}
	rest = strings.TrimPrefix(rest, "/")
	switch rest {
	case "":
		keys := []string{"ami-id", "ami-launch-index", "events/", "hostname", "instance-id", "instance-life-cycle",
			"instance-type", "local-hostname", "local-ipv4", "placement/", "reservation-id", "security-groups"}
		if role != "" {
			keys = append(keys, "iam/")
		}
		if in.action != "" {
			keys = append(keys, "spot/")
		}
		return strings.Join(keys, "\n"), true
	case "ami-id":
		return in.ImageID, true
	case "ami-launch-index":
		return strconv.Itoa(in.amiIndex), true
	case "instance-id":
		return in.ID, true
	case "instance-type":
		return in.Type, true
	case "instance-life-cycle":
		return lifecycle, true
	case "local-ipv4":
		return "127.0.0.1", true
	case "hostname", "local-hostname":
		return "ip-127-0-0-1.ec2.internal", true
	case "reservation-id":
		return in.ReservationID, true
	case "security-groups":
		return strings.Join(in.SecurityGroups, "\n"), true
	case "placement/":
		return "availability-zone\nregion", true
	case "placement/availability-zone":
		return in.AZ, true
	case "placement/region":
		return s.cfg.Region, true
	case "spot/":
		return "instance-action", in.action != ""
	case "spot/instance-action":
		return in.action, in.action != ""
	case "events/":
		return "recommendations/", true
	case "events/recommendations/":
		return "rebalance", in.rebalance != ""
	case "events/recommendations/rebalance":
		return in.rebalance, in.rebalance != ""
	}
	if role == "" {
		return "", false
	}
	switch rest {
	case "iam/":
		return "info\nsecurity-credentials/", true
	case "iam/info":
		info, _ := json.Marshal(map[string]string{"Code": "Success", "LastUpdated": ec2Time(in.LaunchTime),
			"InstanceProfileArn": fmt.Sprintf("arn:aws:iam::%s:instance-profile/%s", AccountID, role),
			"InstanceProfileId":  "AIPA" + strings.ToUpper(in.ID[2:])})
		return string(info), true
	case "iam/security-credentials", "iam/security-credentials/":
		return role, s.cfg.InstanceCredentials != nil
	case "iam/security-credentials/" + role:
		c := s.cfg.InstanceCredentials
		if c == nil {
			return "", false
		}
		creds, _ := json.Marshal(map[string]string{"Code": "Success", "LastUpdated": ec2Time(time.Now()),
			"Type": "AWS-HMAC", "AccessKeyId": c.AccessKeyID, "SecretAccessKey": c.SecretAccessKey,
			"Token": c.SessionToken, "Expiration": time.Now().Add(6 * time.Hour).UTC().Format(time.RFC3339)})
		return string(creds), true
	}
	return "", false
}

// profileRole names the role of an instance profile given by name or ARN: the fake gives each
// profile a role of the same name.
func profileRole(profile string) string {
	if profile == "" {
		return ""
	}
	return path.Base(profile)
}
