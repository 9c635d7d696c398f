package api

//go:generate go run ./openapigen -o openapi.json

import (
	"fmt"
	"net/http"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"

	"corral"
	"corral/internal/openapi"
	"corral/internal/service"
)

// The API's contract, openapi.json, is generated from this package: the
// paths from the route table, the schemas by reflection over the views
// and requests (components, in contract_schemas.go), and the prose from
// the tables here and in contract_paths.go. Run `make openapi` (or `go
// generate ./internal/api`) after changing any of them; TestOpenAPIUpToDate
// fails until the checked-in file is the generated one, and the web app's
// types are generated from that file in turn.
//
// Descriptions live in Go maps beside the types rather than in struct
// tags: many are paragraphs with backquotes, which a tag cannot hold
// readably, and a map keyed by JSON name is checked (a key that names no
// field fails the build of the document) where a tag would drift silently.

// operation documents one route: what the route table cannot say.
type operation struct {
	id, summary, doc string
	tags             []string
	query            []*openapi.Parameter
	body             *body
	// replies are the route's answers. One with only a status is the
	// shared answer for that status (sharedReplies); 401 is added to every
	// route that needs a sign-in.
	replies []reply
}

// body is what a request carries: a JSON body of of's type, or the media
// types of one that is not JSON.
type body struct {
	of       any
	media    []string
	optional bool
	// require lists fields of of that this route requires although the
	// type leaves them optional; also is laid beside of's schema (allOf).
	require []string
	also    *openapi.Schema
	doc     string
}

// reply is one answer: a JSON body of of's type (or schema), or media;
// both of and media: values of of's type in that media type (JSON lines).
type reply struct {
	status  int
	of      any
	schema  *openapi.Schema
	media   []string
	require []string
	headers []header
	doc     string
}

type header struct{ name, doc string }

// sharedReplies are the error answers routes share, by status.
var sharedReplies = []struct {
	name   string
	status int
	doc    string
}{
	{"BadRequest", 400, "400 `invalid_input` (and more specific codes such as `invalid_name`, `invalid_content`): " +
		"the body is not one JSON object of the documented shape (unknown fields are refused), or " +
		"a value breaks a rule."},
	{"Unauthenticated", 401, "401 `unauthenticated`: no valid session cookie or bearer token (or the account is disabled)."},
	{"Forbidden", 403, "403 `forbidden`: the caller can see the resource but not do this."},
	{"NotFound", 404, "404 `not_found`: the resource does not exist, or the caller may not see it; the two " +
		"answers are identical, so existence is not leaked."},
	{"Conflict", 409, "409 `conflict`: the request conflicts with the current state."},
	{"TooLarge", 413, fmt.Sprintf("413 `too_large`: the request body is larger than %d bytes, or a field is larger than its limit.", MaxBody)},
	{"Throttled", 429, "429 `throttled`: too many failed logins; try again after `Retry-After` seconds."},
	{"Admission", 422, "422 `admission_denied`: the message was not admitted; `reason` is one of `quarantined`, " +
		"`paused`, `prompt_too_large`, `budget_exhausted`, `disk_quota`, `pending_disk_user`, " +
		"`pending_disk_server`, `run_limit`, `busy` (checked in that order). `pending_disk_user`: " +
		"the change sets waiting for review of all the agent owner's agents hold the server's " +
		"per-person bound (`--pending-disk-per-user`, default 16 GiB); `pending_disk_server`: " +
		"those of every agent hold its bound (`--pending-disk-total`, default 64 GiB); the " +
		"message gives the figures and, to the owner, their largest pending change sets (id, " +
		"agent, size) to approve or reject. A refusal makes no model call, takes no run slot and " +
		"is kept as evidence (sizes and counts, never the text)."},
	{"Unavailable", 503, "503 `unavailable`: runs cannot happen here: no model provider is configured (the message " +
		"says how to configure one) or the sandbox is unavailable."},
}

// pathParams documents the path parameters: a route's {id} is named by
// the collection it follows, every other by its own name.
var pathParams = []struct {
	component, name, after, doc string
}{
	{"AgentId", "id", "agents", "The agent's id."},
	{"GranteeId", "user_id", "", "The id of the user the grant is for."},
	{"LinkId", "link_id", "", "The share link's id."},
	{"LinkToken", "token", "", "The share link's secret token."},
	{"TokenId", "id", "tokens", "The API token's id."},
	{"AccountId", "id", "users", "The account's id."},
	{"ChangeSetId", "id", "changes", "A change set id."},
	{"RunId", "id", "runs", "The run's id."},
	{"CredentialId", "id", "credentials", "The credential's id."},
	{"DocumentId", "doc_id", "", "A document's id."},
	{"SecretId", "secret_id", "", "An agent secret's id."},
	{"NodeId", "id", "nodes", "A node's id."},
}

var tags = []openapi.Tag{
	{Name: "accounts", Description: "Signup, login, sessions and API tokens."},
	{Name: "admin", Description: "Account administration (admins only)."},
	{Name: "agents", Description: "Agents and their settings."},
	{Name: "sharing", Description: "Grants and share links."},
	{Name: "messages", Description: "An agent's thread."},
	{Name: "meta", Description: "This document."},
	{Name: "runs", Description: "Runs: what an agent does for a message, its trace and live events."},
	{Name: "credentials", Description: "Code-host credentials (a token for a git host), kept encrypted at rest and never answered."},
	{Name: "egress", Description: "What an agent's runs may reach on the network, and the secrets the egress proxy adds to their requests."},
	{Name: "repositories", Description: "A git repository as the persistent workspace: clone, a commit per applied change set, push."},
	{Name: "operations", Description: "Operating the server: token usage, the audit log, the runs in flight, every agent's budget."},
}

func info() openapi.Info {
	return openapi.Info{Title: "Corral API", Version: "1", Description: strings.Join([]string{
		"JSON over HTTP under `/api`.",
		"Authentication: the session cookie `" + CookieName + "` (HttpOnly, SameSite=Lax, Secure when served over TLS), set by signup and login, or " +
			"`Authorization: Bearer <api token>`. A request that presents a bearer token is judged on " +
			"it alone.",
		"Unsafe methods (POST, PUT, PATCH, DELETE) from other origins are refused with 403 `forbidden`, so a cookie cannot be used cross-site.",
		fmt.Sprintf("Request bodies are one JSON object, at most %d bytes (413 `too_large` past that); "+
			"unknown fields are refused (400 `invalid_input`); a body that is not valid UTF-8, or "+
			"escapes a lone UTF-16 surrogate (`\\ud800` not followed by a low surrogate), is refused "+
			"with 400 `invalid_content` rather than having the bad text replaced.", MaxBody),
		"Errors: `{\"error\": {\"code\": \"<machine code>\", \"message\": \"<human text>\"}}` " +
			"with these statuses: 400 `invalid_input` (and more specific codes such as " +
			"`invalid_name`, `invalid_content`), 401 `unauthenticated`, 403 `forbidden` (the caller " +
			"can see the resource but not do this), 404 `not_found` (also for a resource the caller " +
			"may not see: existence is not leaked), 409 `conflict`, 413 `too_large`, 429 `throttled` " +
			"(with `Retry-After`), 500 `internal`, 503 `unavailable`. An unknown path is 404 " +
			"`not_found`; a known path with the wrong method is 405 `method_not_allowed` with " +
			"`Allow`. Every path under `/api/` and `/v1/` (the model gateway's, which only sandboxes " +
			"are served) answers JSON, never the web app's page: an unknown one is this 404 whatever " +
			"the method.",
		"Times are RFC 3339 UTC strings; ids are opaque strings. List endpoints return `{\"items\": [...]}`.",
	}, "\n\n")}
}

// OpenAPI generates the API's OpenAPI document: what openapi.json must
// hold.
func OpenAPI() ([]byte, error) {
	schemas, err := openapi.NewSchemas(components())
	if err != nil {
		return nil, err
	}
	doc := &openapi.Document{
		OpenAPI:  "3.1.0",
		Info:     info(),
		Servers:  []openapi.Server{{URL: "/"}},
		Security: []openapi.SecurityRequirement{{"session": {}}, {"bearer": {}}},
		Tags:     tags,
		Paths:    &openapi.Map[*openapi.PathItem]{},
		Components: openapi.Components{
			SecuritySchemes: &openapi.Map[*openapi.SecurityScheme]{},
			Parameters:      &openapi.Map[*openapi.Parameter]{},
			Schemas:         schemas.Components(),
			Responses:       &openapi.Map[*openapi.Response]{},
		},
	}
	doc.Components.SecuritySchemes.Set("session", &openapi.SecurityScheme{Type: "apiKey", In: "cookie", Name: CookieName,
		Description: "The session cookie set by signup and login (HttpOnly, SameSite=Lax, Secure when served over TLS)."})
	doc.Components.SecuritySchemes.Set("bearer", &openapi.SecurityScheme{Type: "http", Scheme: "bearer",
		Description: "`Authorization: Bearer <api token>`, a personal API token from POST /api/tokens."})
	for _, p := range pathParams {
		doc.Components.Parameters.Set(p.component, &openapi.Parameter{Name: p.name, In: "path", Required: true, Description: p.doc, Schema: openapi.Of("string")})
	}
	shared := map[int]string{}
	for _, r := range sharedReplies {
		shared[r.status] = r.name
		resp := &openapi.Response{Description: r.doc, Content: jsonContent(openapi.Ref("Error"))}
		if r.status == http.StatusTooManyRequests {
			resp.Headers = retryAfter()
		}
		doc.Components.Responses.Set(r.name, resp)
	}

	ops := operations()
	for _, rt := range (&Server{}).routes() {
		pattern := rt.method + " " + rt.path
		op, ok := ops[pattern]
		if !ok {
			return nil, fmt.Errorf("route %s has no operation in contract_paths.go", pattern)
		}
		delete(ops, pattern)
		o, err := op.build(rt, schemas, shared)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", pattern, err)
		}
		item, ok := doc.Paths.Get(rt.path)
		if !ok {
			params, err := pathParameters(rt.path)
			if err != nil {
				return nil, err
			}
			item = &openapi.PathItem{Parameters: params}
			doc.Paths.Set(rt.path, item)
		}
		switch rt.method {
		case "GET":
			item.Get = o
		case "PUT":
			item.Put = o
		case "POST":
			item.Post = o
		case "DELETE":
			item.Delete = o
		case "PATCH":
			item.Patch = o
		default:
			return nil, fmt.Errorf("%s: method %s", pattern, rt.method)
		}
	}
	if len(ops) > 0 {
		var stale []string
		for p := range ops {
			stale = append(stale, p)
		}
		sort.Strings(stale)
		return nil, fmt.Errorf("contract_paths.go documents routes the server does not serve: %s", strings.Join(stale, ", "))
	}
	return openapi.Encode(doc)
}

func (op operation) build(rt route, schemas *openapi.Schemas, shared map[int]string) (*openapi.Operation, error) {
	o := &openapi.Operation{OperationID: op.id, Summary: op.summary, Description: op.doc, Tags: op.tags,
		Parameters: op.query, Responses: &openapi.Map[*openapi.Response]{}}
	if !rt.auth {
		o.Security = &[]openapi.SecurityRequirement{}
	}
	if b := op.body; b != nil {
		rb := &openapi.RequestBody{Description: b.doc, Required: !b.optional}
		if b.of != nil {
			s, err := schemas.Body(b.of, true)
			if err != nil {
				return nil, err
			}
			rb.Content = jsonContent(narrow(s, b.require, b.also))
		} else {
			rb.Content = mediaContent(b.media)
		}
		o.RequestBody = rb
	}
	replies := op.replies
	if rt.auth {
		replies = append(replies, reply{status: http.StatusUnauthorized})
	}
	sort.SliceStable(replies, func(i, j int) bool { return replies[i].status < replies[j].status })
	for _, r := range replies {
		key := strconv.Itoa(r.status)
		if _, dup := o.Responses.Get(key); dup {
			continue // 401 listed by hand on a signed-in route
		}
		if r.doc == "" {
			name, ok := shared[r.status]
			if !ok {
				return nil, fmt.Errorf("status %d: no shared answer; give it a doc", r.status)
			}
			o.Responses.Set(key, &openapi.Response{Ref: "#/components/responses/" + name})
			continue
		}
		resp := &openapi.Response{Description: r.doc}
		switch {
		case r.of != nil && r.media != nil: // JSON values in another framing (JSON lines)
			s, err := schemas.Body(r.of, false)
			if err != nil {
				return nil, err
			}
			resp.Content = &openapi.Map[*openapi.MediaType]{}
			for _, t := range r.media {
				resp.Content.Set(t, &openapi.MediaType{Schema: s})
			}
		case r.of != nil:
			s, err := schemas.Body(r.of, false)
			if err != nil {
				return nil, err
			}
			resp.Content = jsonContent(narrow(s, r.require, nil))
		case r.schema != nil:
			resp.Content = jsonContent(r.schema)
		case r.media != nil:
			resp.Content = mediaContent(r.media)
		}
		if len(r.headers) > 0 {
			resp.Headers = &openapi.Map[*openapi.Header]{}
			for _, h := range r.headers {
				resp.Headers.Set(h.name, &openapi.Header{Description: h.doc, Schema: openapi.Of("string")})
			}
		}
		if r.status == http.StatusTooManyRequests {
			resp.Headers = retryAfter()
		}
		o.Responses.Set(key, resp)
	}
	return o, nil
}

// narrow lays require and also beside s.
func narrow(s *openapi.Schema, require []string, also *openapi.Schema) *openapi.Schema {
	if require == nil && also == nil {
		return s
	}
	if also == nil {
		also = &openapi.Schema{}
	}
	if require != nil {
		also.Required = require
	}
	return &openapi.Schema{AllOf: []*openapi.Schema{s, also}}
}

func jsonContent(s *openapi.Schema) *openapi.Map[*openapi.MediaType] {
	m := &openapi.Map[*openapi.MediaType]{}
	m.Set("application/json", &openapi.MediaType{Schema: s})
	return m
}

// mediaContent is a body that is not JSON: text, or bytes.
func mediaContent(media []string) *openapi.Map[*openapi.MediaType] {
	m := &openapi.Map[*openapi.MediaType]{}
	for _, t := range media {
		s := &openapi.Schema{Type: openapi.Types{"string"}, Format: "binary"}
		if strings.HasPrefix(t, "text/") {
			s.Format = ""
		}
		m.Set(t, &openapi.MediaType{Schema: s})
	}
	return m
}

func retryAfter() *openapi.Map[*openapi.Header] {
	h := &openapi.Map[*openapi.Header]{}
	h.Set("Retry-After", &openapi.Header{Description: "Whole seconds to wait before trying again.",
		Schema: &openapi.Schema{Type: openapi.Types{"integer"}, Minimum: openapi.Int(1)}})
	return h
}

var pathParam = regexp.MustCompile(`\{([a-z_]+)\}`)

// pathParameters refers to the documented parameter of each {name} in
// path.
func pathParameters(path string) ([]*openapi.Parameter, error) {
	var out []*openapi.Parameter
	segs := strings.Split(path, "/")
	for i, seg := range segs {
		m := pathParam.FindStringSubmatch(seg)
		if m == nil {
			continue
		}
		found := ""
		for _, p := range pathParams {
			if p.name == m[1] && (p.after == "" || i > 0 && segs[i-1] == p.after) {
				found = p.component
				break
			}
		}
		if found == "" {
			return nil, fmt.Errorf("%s: {%s} is not in pathParams", path, m[1])
		}
		out = append(out, &openapi.Parameter{Ref: "#/components/parameters/" + found})
	}
	return out, nil
}

// OpenAPIDescription says what every list answer is.
func (list[T]) OpenAPIDescription() string { return "`{items: [...]}`" }

// OpenAPISchema is a list of the policy's actions, each at most once,
// and says from which level the policy allows each.
func (canView) OpenAPISchema() *openapi.Schema {
	names := service.Actions()
	var from []string
	for _, a := range names {
		lowest := "none"
		for l := corral.LevelViewer; l <= corral.LevelOwner; l++ {
			if slices.Contains(service.Allowed(l), a) {
				lowest = "`" + l.String() + "`"
				break
			}
		}
		from = append(from, fmt.Sprintf("`%s` from %s", a, lowest))
	}
	return &openapi.Schema{Type: openapi.Types{"array"}, UniqueItems: true,
		Items: &openapi.Schema{Type: openapi.Types{"string"}, Enum: openapi.Enum(names...)},
		Description: "What the caller may do to an agent: the actions of the access policy that the caller's " +
			"level on the agent allows, in the policy's order. The server decides each request again; this " +
			"tells a client which controls to offer. The policy allows, by the lowest level: " +
			strings.Join(from, ", ") + "."}
}
