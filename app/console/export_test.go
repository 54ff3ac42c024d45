package console

import (
	"strconv"

	"github.com/tollgate/tollgate/app/store"
)

// RouteAccess maps "METHOD /console/pattern" to who may call it, for the test
// that walks the mounted router.
func (c *Console) RouteAccess() map[string]string {
	m := map[string]string{}
	for _, rt := range c.routes() {
		m[rt.method+" "+Prefix+rt.pattern] = rt.access.String()
	}
	return m
}

// OpenStreams is how many event streams are being served.
func (c *Console) OpenStreams() int64 { return c.streams.Load() }

// AuditSentence is how the audit page words e, naming members from emails.
func AuditSentence(e store.AuditEntry, emails map[int64]string) string {
	n := auditNames{emails: map[string]string{}}
	for id, email := range emails {
		n.emails[strconv.FormatInt(id, 10)] = email
	}
	return n.sentence(e)
}
