package console

import (
	"cmp"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/tollgate/tollgate/app/store"
	"github.com/tollgate/tollgate/views"
)

// auditPageSize is how many entries one page of the audit log shows.
const auditPageSize = 50

// showAudit lists the team's changes, newest first, as sentences: filtered by
// member and by action, paged by entry id (?before=), so a page never shifts
// when new entries arrive.
func (c *Console) showAudit(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	v := viewerFrom(ctx)
	members, err := c.st.Members(ctx, v.team.ID)
	if err != nil {
		c.fail(w, r, err)
		return
	}
	q := r.URL.Query()
	f := store.AuditFilter{TeamID: &v.team.ID, Limit: auditPageSize + 1}
	vm := views.Audit{Nav: nav(v, views.TabAudit), Action: q.Get("action"), Member: q.Get("member")}
	if vm.Action != "" {
		if auditActionLabels[vm.Action] == "" {
			c.failWith(w, r, http.StatusBadRequest, "Unknown action", "The audit log has no action "+strconv.Quote(vm.Action)+".")
			return
		}
		f.Action = vm.Action
	}
	if vm.Member != "" {
		m, err := c.st.FindMember(ctx, v.team.ID, vm.Member)
		if err != nil {
			c.fail(w, r, err)
			return
		}
		f.Member = &m
	}
	if before := q.Get("before"); before != "" {
		if f.BeforeID, err = strconv.ParseInt(before, 10, 64); err != nil || f.BeforeID <= 0 {
			c.failWith(w, r, http.StatusBadRequest, "Bad page", "before must be the id of an audit entry.")
			return
		}
		vm.Newer = auditURL(vm.Member, vm.Action, 0)
	}
	entries, err := c.st.AuditFiltered(ctx, f)
	if err != nil {
		c.fail(w, r, err)
		return
	}
	if len(entries) > auditPageSize {
		entries = entries[:auditPageSize]
		vm.Older = auditURL(vm.Member, vm.Action, entries[len(entries)-1].ID)
	}
	n := auditNames{emails: map[string]string{}}
	for _, m := range members {
		n.emails[strconv.FormatInt(m.ID, 10)] = m.Email
		vm.Members = append(vm.Members, views.Option{Value: strconv.FormatInt(m.ID, 10), Label: m.Email})
	}
	for _, a := range store.AuditActions() {
		vm.Actions = append(vm.Actions, views.Option{Value: a, Label: auditActionLabels[a]})
	}
	for _, e := range entries {
		vm.Rows = append(vm.Rows, views.AuditRow{ID: e.ID, At: e.At.UTC().Format("2006-01-02 15:04:05"), Sentence: n.sentence(e)})
	}
	c.render(w, r, http.StatusOK, views.AuditPage(vm))
}

func auditURL(member, action string, before int64) string {
	q := url.Values{}
	if member != "" {
		q.Set("member", member)
	}
	if action != "" {
		q.Set("action", action)
	}
	if before > 0 {
		q.Set("before", strconv.FormatInt(before, 10))
	}
	if len(q) == 0 {
		return Prefix + "/audit"
	}
	return Prefix + "/audit?" + q.Encode()
}

// auditActionLabels names each action in the filter.
var auditActionLabels = map[string]string{
	store.ActionMemberStatus:      "Cut off or restored",
	store.ActionMemberRemove:      "Member removed",
	store.ActionMemberRole:        "Role changed",
	store.ActionMemberLimits:      "Member limits",
	store.ActionTeamLimits:        "Team limits",
	store.ActionTeamOverBudget:    "Over-budget requests",
	store.ActionKeyIssue:          "Key issued",
	store.ActionKeyRotate:         "Key rotated",
	store.ActionKeyRevoke:         "Key revoked",
	store.ActionMemberAdd:         "Member added",
	store.ActionInviteCreate:      "Invite made",
	store.ActionInviteRevoke:      "Invite revoked",
	store.ActionInviteReissue:     "Invite sent again",
	store.ActionMemberPassword:    "Password set",
	store.ActionRouteAdd:          "Route added",
	store.ActionRouteUpdate:       "Route changed",
	store.ActionRouteTargetAdd:    "Route target added",
	store.ActionRouteTargetRemove: "Route target removed",
	store.ActionRouteResilience:   "Route retries and health check",
	store.ActionRouteDelete:       "Route deleted",
	store.ActionPriceSet:          "Price set",
	store.ActionTeamCreate:        "Team created",
	store.ActionSetupLink:         "Setup link made",
	store.ActionAdminTokenCreate:  "Admin token made",
	store.ActionAdminTokenRevoke:  "Admin token revoked",
	store.ActionTeamSSO:           "Single sign-on set",
	store.ActionPasswordSignIn:    "Password sign-in on or off",
	store.ActionTierCreate:        "Tier made",
	store.ActionTierUpdate:        "Tier changed",
	store.ActionTierDelete:        "Tier deleted",
	store.ActionMemberTier:        "Member's tier",
	store.ActionTeamDefaultTier:   "New members' tier",
	store.ActionBudgetRequest:     "Budget asked for",
	store.ActionBudgetApprove:     "Budget request approved",
	store.ActionBudgetAutoApprove: "Budget request auto-approved",
	store.ActionBudgetDecline:     "Budget request declined",
	store.ActionWebhookCreate:     "Webhook added",
	store.ActionWebhookDelete:     "Webhook deleted",
}

// auditNames turns the ids an entry records into what people recognise.
type auditNames struct {
	emails map[string]string // member id → email
}

// actor is who made the change: an email, the operator or a one-time link.
func (n auditNames) actor(a string) string {
	switch store.Actor(a) {
	case store.ActorCLI:
		return "The operator (CLI)"
	case store.ActorSetupLink:
		return "The setup link"
	case store.ActorInviteLink:
		return "An invite link"
	}
	if token, ok := strings.CutPrefix(a, "token:"); ok {
		// token:<id>:<name>, an admin API token.
		id, name, _ := strings.Cut(token, ":")
		return fmt.Sprintf("The admin token %q (%s)", name, id)
	}
	if tier, ok := strings.CutPrefix(a, "auto:tier:"); ok {
		return "The auto-approve ceiling of the tier " + tier
	}
	if id, ok := strings.CutPrefix(a, "member:"); ok {
		if email, ok := n.emails[id]; ok {
			return email
		}
		return "Member " + id + " (since removed)"
	}
	return a
}

func (n auditNames) member(id int64) string {
	if email, ok := n.emails[strconv.FormatInt(id, 10)]; ok {
		return email
	}
	return "member " + strconv.FormatInt(id, 10)
}

// sentence is entry e in words: who did what to whom, with the values it set
// in their units. An entry it cannot read still names its action and target.
func (n auditNames) sentence(e store.AuditEntry) string {
	who := n.actor(e.Actor)
	if link := store.Actor(e.Actor); link == store.ActorSetupLink || link == store.ActorInviteLink {
		// A link's own writes are the person who opened it joining.
		switch e.Action {
		case store.ActionMemberAdd:
			return e.Target + " joined with " + strings.ToLower(who[:1]) + who[1:] + "."
		case store.ActionMemberPassword:
			return e.Target + " set their password."
		}
	}
	s, err := n.describe(e)
	if err != nil {
		return fmt.Sprintf("%s made a %s change to %s (its details could not be read).", who, e.Action, e.Target)
	}
	return who + " " + s + "."
}

// describe is e's predicate: "cut off ada@x", "set ada@x's requests to 60 per minute".
func (n auditNames) describe(e store.AuditEntry) (string, error) {
	switch e.Action {
	case store.ActionTeamCreate:
		return "created the team " + e.Target, nil
	case store.ActionMemberAdd:
		var m store.Member
		err := decode(e.After, &m)
		return "added " + e.Target + " as " + article(m.Role), err
	case store.ActionMemberStatus:
		var after struct{ Status string }
		if err := decode(e.After, &after); err != nil {
			return "", err
		}
		if after.Status == store.StatusActive {
			return "restored " + e.Target, nil
		}
		return "cut off " + e.Target, nil
	case store.ActionMemberRemove:
		return "removed " + e.Target + " from the team", nil
	case store.ActionMemberRole:
		var after struct{ Role string }
		err := decode(e.After, &after)
		return "made " + e.Target + " " + article(after.Role), err
	case store.ActionMemberPassword:
		return "set the password of " + e.Target, nil
	case store.ActionMemberLimits, store.ActionTeamLimits:
		whose := e.Target + "'s"
		if e.Action == store.ActionTeamLimits {
			whose = "the team's"
		}
		before, after := store.NoLimits(), store.NoLimits()
		if err := decodeOptional(e.Before, &before); err != nil {
			return "", err
		}
		if err := decode(e.After, &after); err != nil {
			return "", err
		}
		return setPhrase(whose, "limits", limitChanges(before, after)), nil
	case store.ActionRouteAdd:
		var r store.Route
		err := decode(e.After, &r)
		return "added the route " + e.Target + ", forwarding to " + r.UpstreamURL + credentialPhrase(r.CredentialEnv), err
	case store.ActionRouteUpdate, store.ActionRouteResilience:
		var before, after store.Route
		if err := decode(e.Before, &before); err != nil {
			return "", err
		}
		if err := decode(e.After, &after); err != nil {
			return "", err
		}
		return setPhrase("the route "+e.Target+"'s", "settings", routeChanges(before, after)), nil
	case store.ActionRouteTargetAdd, store.ActionRouteTargetRemove:
		var t store.RouteTarget
		if e.Action == store.ActionRouteTargetAdd {
			err := decode(e.After, &t)
			return "added the upstream " + t.UpstreamURL + credentialPhrase(t.CredentialEnv) + " to the route " + e.Target, err
		}
		err := decode(e.Before, &t)
		return "removed the upstream " + t.UpstreamURL + " from the route " + e.Target, err
	case store.ActionKeyIssue:
		var k store.Key
		err := decode(e.After, &k)
		return fmt.Sprintf("issued the key %s (%q) to %s", e.Target, k.Name, n.member(k.MemberID)), err
	case store.ActionKeyRotate:
		var before store.Key
		var after struct {
			ReplacedBy string    `json:"replaced_by"`
			ExpiresAt  time.Time `json:"expires_at"`
		}
		if err := decode(e.Before, &before); err != nil {
			return "", err
		}
		if err := decode(e.After, &after); err != nil {
			return "", err
		}
		return fmt.Sprintf("rotated %s's key %s to %s; the old key works until %s", n.member(before.MemberID), e.Target,
			after.ReplacedBy, formatTime(after.ExpiresAt)), nil
	case store.ActionKeyRevoke:
		var k store.Key
		err := decode(e.After, &k)
		return "revoked " + n.member(k.MemberID) + "'s key " + e.Target, err
	case store.ActionPriceSet:
		var before, after store.Price
		if err := decodeOptional(e.Before, &before); err != nil {
			return "", err
		}
		if err := decode(e.After, &after); err != nil {
			return "", err
		}
		return setPhrase(e.Target+"'s", "price", priceChanges(before, after)), nil
	case store.ActionInviteCreate:
		var inv store.Invite
		err := decode(e.After, &inv)
		return "invited " + e.Target + " as " + article(inv.Role) + ", with a link valid until " + formatTime(inv.ExpiresAt), err
	case store.ActionInviteRevoke:
		return "revoked the pending invite of " + e.Target, nil
	case store.ActionInviteReissue:
		var inv store.Invite
		err := decode(e.After, &inv)
		return "sent " + e.Target + " a new invite link, valid until " + formatTime(inv.ExpiresAt) + "; the old one no longer works", err
	case store.ActionRouteDelete:
		return "deleted the route " + e.Target, nil
	case store.ActionAdminTokenCreate:
		var tok store.AdminToken
		err := decode(e.After, &tok)
		return fmt.Sprintf("made the admin token %q (%s) with the %s role, valid until %s", tok.Name, e.Target, tok.Role,
			formatTime(tok.ExpiresAt)), err
	case store.ActionAdminTokenRevoke:
		var tok store.AdminToken
		err := decode(e.After, &tok)
		return fmt.Sprintf("revoked the admin token %q (%s)", tok.Name, e.Target), err
	case store.ActionTeamSSO:
		var m store.SSOMethod
		if err := decode(e.After, &m); err != nil {
			return "", err
		}
		state := "turned off"
		if m.Enabled {
			state = "turned on"
		}
		who := "invited people only"
		if m.JoinPolicy != store.JoinInvited {
			who = "anyone it allows (" + m.JoinPolicy + ")"
		}
		return fmt.Sprintf("set sign-in with %s (%s, client %s) %s, letting in %s", m.DisplayName, m.Kind, m.ClientID, state, who), nil
	case store.ActionTeamOverBudget:
		var after struct {
			O store.OverBudget `json:"over_budget"`
		}
		if err := decode(e.After, &after); err != nil {
			return "", err
		}
		if after.O == store.OverBudgetFit {
			return "set requests that do not fit the budget left to be lowered to fit, for members in no tier", nil
		}
		return "set requests that do not fit the budget left to be refused, for members in no tier", nil
	case store.ActionPasswordSignIn:
		var after struct {
			On bool `json:"password_sign_in"`
		}
		if err := decode(e.After, &after); err != nil {
			return "", err
		}
		if after.On {
			return "turned password sign-in on for the team", nil
		}
		return "turned password sign-in off for the team: members sign in through single sign-on", nil
	case store.ActionTierCreate:
		var tr store.Tier
		err := decode(e.After, &tr)
		return fmt.Sprintf("made the tier %s (weight %d): %s", e.Target, tr.Weight, limitsSentence(tr.Limits)), err
	case store.ActionTierUpdate:
		var before, after store.Tier
		if err := decode(e.Before, &before); err != nil {
			return "", err
		}
		if err := decode(e.After, &after); err != nil {
			return "", err
		}
		changes := limitChanges(before.Limits, after.Limits)
		if before.Weight != after.Weight {
			changes = append(changes, change{name: "weight", from: strconv.FormatInt(before.Weight, 10), to: strconv.FormatInt(after.Weight, 10)})
		}
		if before.AutoApprove != after.AutoApprove {
			changes = append(changes, change{name: "auto-approve ceiling", from: "$" + store.FormatDollars(before.AutoApprove),
				to: "$" + store.FormatDollars(after.AutoApprove)})
		}
		if before.OverBudget != after.OverBudget {
			changes = append(changes, change{name: "over budget", from: string(cmp.Or(before.OverBudget, store.OverBudgetRefuse)),
				to: string(after.OverBudget)})
		}
		return setPhrase("the tier "+e.Target+"'s", "limits", changes), nil
	case store.ActionTierDelete:
		return "deleted the tier " + e.Target, nil
	case store.ActionTeamDefaultTier:
		var after struct{ Tier string }
		if err := decode(e.After, &after); err != nil {
			return "", err
		}
		if after.Tier == "" {
			return "set new members to land in no tier (no limit)", nil
		}
		return "set new members to land in the tier " + after.Tier, nil
	case store.ActionMemberTier:
		var before, after struct{ Tier string }
		if err := decode(e.Before, &before); err != nil {
			return "", err
		}
		if err := decode(e.After, &after); err != nil {
			return "", err
		}
		if after.Tier == "" {
			return "took " + e.Target + " out of the tier " + before.Tier, nil
		}
		was := ""
		if before.Tier != "" {
			was = " (was " + before.Tier + ")"
		}
		return "put " + e.Target + " in the tier " + after.Tier + was, nil
	case store.ActionWebhookCreate:
		var w store.Webhook
		err := decode(e.After, &w)
		return fmt.Sprintf("added the %s webhook %s, posting to %s", w.Format, e.Target, w.URL), err
	case store.ActionWebhookDelete:
		return "deleted the webhook " + e.Target, nil
	case store.ActionBudgetRequest:
		var r store.BudgetRequest
		err := decode(e.After, &r)
		return fmt.Sprintf("asked for $%s more budget for %s, because: %q", store.FormatDollars(r.Amount), e.Target, r.Reason), err
	case store.ActionBudgetApprove, store.ActionBudgetAutoApprove, store.ActionBudgetDecline:
		var r store.BudgetRequest
		if err := decode(e.Before, &r); err != nil {
			return "", err
		}
		verb := "approved"
		switch e.Action {
		case store.ActionBudgetAutoApprove:
			verb = "approved at once"
		case store.ActionBudgetDecline:
			verb = "declined"
		}
		var after struct {
			Request store.BudgetRequest
			Budget  *int64 `json:"budget_micros"`
		}
		if e.Action == store.ActionBudgetDecline {
			if err := decode(e.After, &after.Request); err != nil {
				return "", err
			}
		} else if err := decode(e.After, &after); err != nil {
			return "", err
		}
		out := fmt.Sprintf("%s %s's request for $%s more budget", verb, e.Target, store.FormatDollars(r.Amount))
		if after.Budget != nil {
			out += fmt.Sprintf(": their budget this period is now $%s", store.FormatDollars(*after.Budget))
		}
		if after.Request.Note != "" {
			out += fmt.Sprintf(", noting %q", after.Request.Note)
		}
		return out, nil
	case store.ActionSetupLink:
		var inv store.Invite
		err := decode(e.After, &inv)
		return "made a first-run setup link, valid until " + formatTime(inv.ExpiresAt), err
	}
	return "", fmt.Errorf("no sentence for %s", e.Action)
}

func decode(raw json.RawMessage, v any) error {
	if len(raw) == 0 {
		return fmt.Errorf("no payload")
	}
	return json.Unmarshal(raw, v)
}

// decodeOptional leaves v as it is when nothing was recorded (a first write).
func decodeOptional(raw json.RawMessage, v any) error {
	if len(raw) == 0 || string(raw) == "null" {
		return nil
	}
	return json.Unmarshal(raw, v)
}

func article(role string) string {
	if role == store.RoleOwner {
		return "an owner"
	}
	return "a " + cmp.Or(role, store.RoleMember)
}

func credentialPhrase(env string) string {
	if env == "" {
		return ""
	}
	return " with the credential in $" + env
}

// change is one setting an entry changed: "requests to 60 per minute".
type change struct{ name, from, to string }

// setPhrase is "set <whose> a to x and b to y", or says nothing changed.
func setPhrase(whose, what string, changes []change) string {
	if len(changes) == 0 {
		return "saved " + whose + " " + what + " unchanged"
	}
	parts := make([]string, len(changes))
	for i, c := range changes {
		parts[i] = c.name + " to " + c.to
		if c.from != "" {
			parts[i] += " (was " + c.from + ")"
		}
	}
	list := parts[0]
	if len(parts) > 1 {
		list = strings.Join(parts[:len(parts)-1], ", ") + " and " + parts[len(parts)-1]
	}
	return "set " + whose + " " + list
}

// limitsSentence is l as "requests: 60 per minute, tokens per minute: no limit, ...".
func limitsSentence(l store.Limits) string {
	lines := describeLimits(l)
	parts := make([]string, len(lines))
	for i, line := range lines {
		parts[i] = strings.ToLower(line.Name) + ": " + line.Value
	}
	return strings.Join(parts, ", ")
}

func limitChanges(before, after store.Limits) []change {
	var out []change
	b, a := describeLimits(before), describeLimits(after)
	for i := range a {
		if a[i].Value != b[i].Value {
			out = append(out, change{name: strings.ToLower(a[i].Name), from: b[i].Value, to: a[i].Value})
		}
	}
	return out
}

func routeChanges(before, after store.Route) []change {
	var out []change
	add := func(name, from, to string) {
		if from != to {
			out = append(out, change{name: name, from: cmp.Or(from, "none"), to: cmp.Or(to, "none")})
		}
	}
	add("upstream", before.UpstreamURL, after.UpstreamURL)
	add("dialect", before.Dialect, after.Dialect)
	add("credential variable", before.CredentialEnv, after.CredentialEnv)
	add("credential header", before.CredentialHeader, after.CredentialHeader)
	add("credential format", before.CredentialFormat, after.CredentialFormat)
	add("behaviour when Redis is down", failModeWords(before.FailMode), failModeWords(after.FailMode))
	add("attempts", attemptsWords(before.MaxAttempts), attemptsWords(after.MaxAttempts))
	add("health check", before.HealthPath, after.HealthPath)
	return out
}

func failModeWords(mode string) string {
	switch mode {
	case "open":
		return "let requests through"
	case "closed":
		return "refuse requests"
	}
	return mode
}

func attemptsWords(n int) string {
	if n <= 1 {
		return "1 (no retries)"
	}
	return strconv.Itoa(n)
}

func priceChanges(before, after store.Price) []change {
	var out []change
	rate := func(name string, from, to int64) {
		if from != to {
			c := change{name: name, to: perMTok(to) + " per million tokens"}
			if before.Model != "" {
				c.from = perMTok(from) + " per million tokens"
			}
			out = append(out, c)
		}
	}
	rate("input price", before.InputPerMTok, after.InputPerMTok)
	rate("output price", before.OutputPerMTok, after.OutputPerMTok)
	rate("cache write price", before.CacheWritePerMTok, after.CacheWritePerMTok)
	rate("1-hour cache write price", before.CacheWrite1hPerMTok, after.CacheWrite1hPerMTok)
	rate("cache read price", before.CacheReadPerMTok, after.CacheReadPerMTok)
	if before.MaxOutputTokens != after.MaxOutputTokens {
		c := change{name: "maximum output", to: strconv.FormatInt(after.MaxOutputTokens, 10) + " tokens"}
		if before.Model != "" {
			c.from = strconv.FormatInt(before.MaxOutputTokens, 10) + " tokens"
		}
		out = append(out, c)
	}
	if before.TierThreshold != after.TierThreshold {
		out = append(out, change{name: "long-context threshold", to: strconv.FormatInt(after.TierThreshold, 10) + " tokens"})
	}
	rate("long-context input price", before.TierInputPerMTok, after.TierInputPerMTok)
	rate("long-context output price", before.TierOutputPerMTok, after.TierOutputPerMTok)
	rate("long-context cache write price", before.TierCacheWritePerMTok, after.TierCacheWritePerMTok)
	rate("long-context 1-hour cache write price", before.TierCacheWrite1hPerMTok, after.TierCacheWrite1hPerMTok)
	rate("long-context cache read price", before.TierCacheReadPerMTok, after.TierCacheReadPerMTok)
	return out
}
