package views

// WebhooksPage is the owners' page of the team's alert webhooks.
type WebhooksPage struct {
	Nav     Nav
	Section Webhooks
}

// Webhooks is the swap target of adding, testing and deleting a webhook.
type Webhooks struct {
	Rows []WebhookRow
	// New is the webhook just added, with its signing secret: shown on this answer only.
	New    *NewWebhook
	Error  string
	Notice string
	// The add form's values, kept when it is refused.
	Name, URL, Format string
}

// WebhookRow is one webhook, never its secret, with its latest delivery.
type WebhookRow struct {
	ID, Name, URL, Format string
	// Last says how the latest delivery went: "none yet", "delivered ...",
	// "retrying ..." or "gave up ...".
	Last, LastError    string
	TestURL, DeleteURL string
}

// NewWebhook is a webhook just added.
type NewWebhook struct {
	Name, Format, Secret string
}

// WebhooksURL is the webhooks page and where its add form posts.
const WebhooksURL = "/console/team/webhooks"
