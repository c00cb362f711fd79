package client

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"

	"github.com/rubberband-hpo/rubberband/trial/codebundle"
)

// SendCode packs dir (a spec's trainer.workdir) and uploads the bundle unless the caller's team
// has it on the server already (HEAD /api/v1/code/{id}): an unchanged folder is sent once. It
// returns the bundle's manifest (its ID goes in the submission's Code) and whether it was sent.
func (c *Client) SendCode(ctx context.Context, dir string) (*codebundle.Manifest, bool, error) {
	m, err := codebundle.Scan(dir, codebundle.Limits{})
	if err != nil {
		return nil, false, err
	}
	path := "/api/v1/code/" + m.SHA256
	resp, err := c.send(ctx, http.MethodHead, path, nil)
	if err == nil {
		resp.Body.Close()
		return m, false, nil
	}
	var ce *Error
	if !errors.As(err, &ce) || ce.Status != http.StatusNotFound {
		return nil, false, err
	}
	// Packed to a file, not memory: a bundle may be 100 MiB.
	tmp, err := os.CreateTemp("", "rubberband-code-*.tar.gz")
	if err != nil {
		return nil, false, err
	}
	defer os.Remove(tmp.Name())
	defer tmp.Close()
	if err := m.Write(tmp); err != nil {
		return nil, false, err
	}
	if _, err := tmp.Seek(0, 0); err != nil {
		return nil, false, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPut, c.Base+path, tmp)
	if err != nil {
		return nil, false, err
	}
	resp, err = c.sendRequest(req, codebundle.MediaType)
	if err != nil {
		return nil, false, fmt.Errorf("send the trainer's code %s: %w", dir, err)
	}
	resp.Body.Close()
	return m, true, nil
}
