package langfuse

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"

	"go.uber.org/zap"

	"github.com/agentmeter/agentmeter/exporter/internal/vendorhttp"
)

const credentialCheckTimeout = 10 * time.Second

// projectsResponse is the part of GET /api/public/projects (schema Projects in
// langfuse-openapi.yml) the check reads.
type projectsResponse struct {
	Data []struct {
		ID   string `json:"id"`
		Name string `json:"name"`
	} `json:"data"`
}

// checkCredentials makes the one cheap authenticated call the Langfuse SDKs use for
// auth_check (docs/langfuse.md). Rejected keys fail start; anything that says nothing
// about the keys (network error, 429, 5xx) only logs, so a Langfuse outage never keeps
// the collector down.
func (e *langfuseExporter) checkCredentials(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, credentialCheckTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, e.projectsURL, http.NoBody)
	if err != nil {
		return fmt.Errorf("langfuse credential check: building the request: %w", err)
	}
	req.Header.Set("Authorization", e.auth)
	req.Header.Set("User-Agent", e.userAgent)
	resp, err := e.client.Do(req)
	if err != nil {
		e.logger.Warn("Could not reach Langfuse to check the credentials; starting anyway", zap.Error(vendor.NetworkError(err, "GET "+projectsPath)))
		return nil
	}
	defer vendorhttp.Drain(resp)
	switch {
	case resp.StatusCode == http.StatusUnauthorized || resp.StatusCode == http.StatusForbidden:
		return fmt.Errorf("langfuse credential check failed: %w", vendor.CredentialError(resp.StatusCode, "", serverMessage(resp)))
	case resp.StatusCode != http.StatusOK:
		e.logger.Warn("Langfuse could not check the credentials; starting anyway",
			zap.Int("status", resp.StatusCode), zap.String("server_message", serverMessage(resp)))
		return nil
	}
	var projects projectsResponse
	if err := json.NewDecoder(io.LimitReader(resp.Body, maxResponseRead)).Decode(&projects); err != nil {
		e.logger.Warn("Unreadable answer to the Langfuse credential check; starting anyway", zap.Error(err))
		return nil
	}
	if len(projects.Data) == 0 {
		// the Python SDK's auth_check fails the same way: an organization-scoped key
		// authenticates but cannot ingest.
		return errors.New("langfuse credential check failed: the keys are valid but bound to no project " +
			"(an organization-scoped key?); use a project's public_key/secret_key")
	}
	e.logger.Info("Langfuse credentials checked",
		zap.String("project_id", projects.Data[0].ID), zap.String("project_name", projects.Data[0].Name))
	return nil
}
