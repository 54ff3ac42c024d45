package sso

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"

	"golang.org/x/oauth2"
)

// githubIdentity asks GitHub's API who holds the token: their primary email
// if GitHub has verified it, and, when the team names an organisation, whether
// they are an active member of it.
func (c *Client) githubIdentity(ctx context.Context, cfg Config, tok *oauth2.Token) (Identity, error) {
	var user struct {
		ID    int64  `json:"id"`
		Login string `json:"login"`
	}
	if _, err := c.githubGet(ctx, tok, "/user", &user); err != nil {
		return Identity{}, err
	}
	var emails []struct {
		Email    string `json:"email"`
		Primary  bool   `json:"primary"`
		Verified bool   `json:"verified"`
	}
	if _, err := c.githubGet(ctx, tok, "/user/emails", &emails); err != nil {
		return Identity{}, err
	}
	id := Identity{Subject: fmt.Sprint(user.ID)}
	for _, e := range emails {
		if e.Primary && e.Verified {
			id.Email = e.Email
		}
	}
	if id.Email == "" {
		return Identity{}, refused("GitHub has no verified primary email address for %s", user.Login)
	}
	if cfg.Org != "" {
		var membership struct {
			State string `json:"state"`
		}
		status, err := c.githubGet(ctx, tok, "/user/memberships/orgs/"+url.PathEscape(cfg.Org), &membership)
		if err != nil && status != http.StatusNotFound && status != http.StatusForbidden {
			return Identity{}, err
		}
		// Pending invitations are not membership yet.
		id.OrgMember = err == nil && membership.State == "active"
	}
	return id, nil
}

// githubGet reads one API resource into into. A non-2xx answer is an error
// carrying its status, which the caller may expect (404: not a member).
func (c *Client) githubGet(ctx context.Context, tok *oauth2.Token, path string, into any) (int, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.github.APIURL+path, nil)
	if err != nil {
		return 0, &ProviderError{Problem: "GitHub API URL is invalid"}
	}
	req.Header.Set("Accept", "application/vnd.github+json")
	req.Header.Set("X-GitHub-Api-Version", "2022-11-28")
	tok.SetAuthHeader(req)
	resp, err := c.http.Do(req)
	if err != nil {
		return 0, &ProviderError{Problem: "GitHub's API does not answer: " + transportProblem(err)}
	}
	defer resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
		return resp.StatusCode, &ProviderError{Problem: fmt.Sprintf("GitHub's API answered %s with HTTP %d", path, resp.StatusCode)}
	}
	if err := json.NewDecoder(io.LimitReader(resp.Body, 1<<20)).Decode(into); err != nil {
		return resp.StatusCode, &ProviderError{Problem: fmt.Sprintf("GitHub's API answered %s with something other than the expected JSON", path)}
	}
	return resp.StatusCode, nil
}
