package console

import (
	"net/http"
	"strings"
	"time"

	"github.com/tollgate/tollgate/app/store"
	"github.com/tollgate/tollgate/views"
)

// auditRows is how many entries the audit page shows.
const auditRows = 200

// showAudit lists the team's newest changes, naming members by email.
func (c *Console) showAudit(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	v := viewerFrom(ctx)
	entries, err := c.st.Audit(ctx, &v.team.ID, auditRows)
	if err != nil {
		c.fail(w, r, err)
		return
	}
	members, err := c.st.Members(ctx, v.team.ID)
	if err != nil {
		c.fail(w, r, err)
		return
	}
	emails := map[string]string{}
	for _, m := range members {
		emails[string(store.MemberActor(m.ID))] = m.Email
	}
	vm := views.Audit{Nav: nav(v, views.TabAudit)}
	for _, e := range entries {
		actor := e.Actor
		if email, ok := emails[actor]; ok {
			actor = email
		}
		vm.Rows = append(vm.Rows, views.AuditRow{At: e.At.UTC().Format(time.DateTime), Actor: actor, Action: e.Action, Target: e.Target,
			Detail: auditDetail(e)})
	}
	c.render(w, r, http.StatusOK, views.AuditPage(vm))
}

func auditDetail(e store.AuditEntry) string {
	var parts []string
	if len(e.Before) > 0 {
		parts = append(parts, "before: "+string(e.Before))
	}
	if len(e.After) > 0 {
		parts = append(parts, "after: "+string(e.After))
	}
	return strings.Join(parts, "\n")
}
