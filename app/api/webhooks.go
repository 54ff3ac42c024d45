package api

import (
	"context"
	"net/http"

	"github.com/danielgtaylor/huma/v2"

	"github.com/tollgate/tollgate/app/store"
)

// WebhookPath names a webhook in a path.
type WebhookPath struct {
	ID int64 `path:"id" doc:"The webhook's id."`
}

type webhookOut struct{ Body store.Webhook }

type webhooksOut struct {
	Body struct {
		Webhooks []store.Webhook `json:"webhooks"`
	}
}

func (a *API) registerWebhooks(h huma.API) {
	huma.Register(h, operation("listWebhooks", http.MethodGet, "/webhooks", AccessOwner, 200,
		"List the team's alert webhooks, each with its latest delivery and error"),
		func(ctx context.Context, _ *struct{}) (*webhooksOut, error) {
			ws, err := a.st.Webhooks(ctx, teamOf(ctx))
			if err != nil {
				return nil, a.fromStore(err, "webhook")
			}
			out := &webhooksOut{}
			out.Body.Webhooks = ws
			return out, nil
		})
	huma.Register(h, secret(creating(operation("createWebhook", http.MethodPost, "/webhooks", AccessOwner, 201,
		"Add an alert webhook; a signed one's secret is in this answer only"))),
		func(ctx context.Context, in *struct {
			IdempotencyKey string `header:"Idempotency-Key" required:"false" doc:"Replays the first response to a retry within 24h."`
			Body           struct {
				Name   string `json:"name" example:"ops channel"`
				URL    string `json:"url" example:"https://hooks.slack.com/services/T000/B000/XXXX"`
				Format string `json:"format" enum:"slack,signed" doc:"slack: {\"text\": ...}; signed: the event as JSON with Standard Webhooks signature headers."`
			}
		}) (*webhookOut, error) {
			w, err := a.st.CreateWebhook(ctx, actorOf(ctx), teamOf(ctx), in.Body.Name, in.Body.URL, in.Body.Format)
			if err != nil {
				return nil, a.fromStore(err, "a webhook named "+in.Body.Name)
			}
			return &webhookOut{Body: w}, nil
		})
	huma.Register(h, operation("deleteWebhook", http.MethodDelete, "/webhooks/{id}", AccessOwner, 204,
		"Delete a webhook and the deliveries still queued for it", 404),
		func(ctx context.Context, in *WebhookPath) (*struct{}, error) {
			if err := a.st.DeleteWebhook(ctx, actorOf(ctx), teamOf(ctx), in.ID); err != nil {
				return nil, a.fromStore(err, "webhook")
			}
			return nil, nil
		})
	huma.Register(h, operation("testWebhook", http.MethodPost, "/webhooks/{id}/test", AccessOwner, 202,
		"Queue a test alert to one webhook; its delivery shows in listWebhooks", 404),
		func(ctx context.Context, in *WebhookPath) (*struct{}, error) {
			if err := a.st.TestWebhook(ctx, teamOf(ctx), in.ID); err != nil {
				return nil, a.fromStore(err, "webhook")
			}
			return nil, nil
		})
}
