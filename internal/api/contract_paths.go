package api

import (
	"maps"

	"corral/internal/openapi"
)

// operations documents each route of the route table, by its pattern; the
// route's path parameters, its security and its 401 come from the table.
// This file holds the routes of accounts, agents, sharing, messages,
// credentials and nodes; workOperations (contract_work.go) the rest.
func operations() map[string]operation {
	ops := map[string]operation{
		"POST /api/auth/signup": {
			id: "signup", tags: []string{"accounts"}, summary: "Create an account and sign it in",
			doc: "No sign-in needed. Creates an account and sets the session cookie. The first account " +
				"becomes admin. The signup mode (`open`, `invite`, `closed`) is a server setting: when " +
				"`closed` the answer is 403; when `invite`, a valid unused `invite` is required (403 " +
				"otherwise). 409 when the email is already registered.",
			body: &body{of: signupRequest{}},
			replies: []reply{
				{status: 201, of: userAnswer{}, headers: []header{{"Set-Cookie", "The session cookie `corral_session` (HttpOnly, SameSite=Lax, Path=/, Secure when served over TLS)."}}, doc: "The new account, signed in."},
				{status: 400},
				{status: 403},
				{status: 409},
				{status: 413},
				{status: 503, of: errorBody{}, doc: "503 `unavailable`: the server cannot count the signup (the store keeping the throttles' records is away), so it makes no account; try again later."},
			},
		},
		"POST /api/auth/login": {
			id: "login", tags: []string{"accounts"}, summary: "Sign in with email and password",
			doc: "No sign-in needed. Checks the password and sets the session cookie. A wrong password, an " +
				"unknown email and a disabled account all get the same 401. Failed logins are throttled per " +
				"account and per client address: 429 with `Retry-After`.",
			body: &body{of: loginRequest{}},
			replies: []reply{
				{status: 200, of: userAnswer{}, headers: []header{{"Set-Cookie", "The session cookie `corral_session` (HttpOnly, SameSite=Lax, Path=/, Secure when served over TLS)."}}, doc: "The account, signed in."},
				{status: 400},
				{status: 401},
				{status: 413},
				{status: 429},
				{status: 503, of: errorBody{}, doc: "503 `unavailable`: the server cannot count the attempt (the store keeping the throttles' records is away), so it checks no password; try again later."},
			},
		},
		"POST /api/auth/logout": {
			id: "logout", tags: []string{"accounts"}, summary: "Sign out",
			doc: "No sign-in needed. Revokes the session of the `corral_session` cookie server-side, if " +
				"there is one, and clears the cookie; the caller is signed out either way. Takes no body.",
			replies: []reply{
				{status: 204, headers: []header{{"Set-Cookie", "Clears the `corral_session` cookie."}}, doc: "Signed out; the session is revoked server-side."},
			},
		},
		"GET /api/me": {
			id: "getMe", tags: []string{"accounts"}, summary: "The signed-in account",
			doc: "Any signed-in user.",
			replies: []reply{
				{status: 200, of: userAnswer{}, doc: "The caller's account."},
				{status: 401},
			},
		},
		"GET /api/tokens": {
			id: "listTokens", tags: []string{"accounts"}, summary: "List your API tokens",
			doc: "Any signed-in user: lists the caller's own API tokens, never their secrets.",
			replies: []reply{
				{status: 200, of: list[tokenView]{}, doc: "The caller's tokens, without `token`."},
				{status: 401},
			},
		},
		"POST /api/tokens": {
			id: "createToken", tags: []string{"accounts"}, summary: "Create an API token",
			doc: "Any signed-in user: creates a personal API token for the caller. The secret is in this " +
				"answer only (it is shown once).",
			body: &body{of: tokenRequest{}},
			replies: []reply{
				{status: 201, of: tokenView{}, require: []string{"token"}, doc: "The new token, with its secret in `token`."},
				{status: 400},
				{status: 401},
				{status: 413},
			},
		},
		"DELETE /api/tokens/{id}": {
			id: "deleteToken", tags: []string{"accounts"}, summary: "Revoke an API token",
			doc: "Any signed-in user, for their own tokens: another user's token is 404, like a missing one.",
			replies: []reply{
				{status: 204, doc: "The token is revoked."},
				{status: 401},
				{status: 404},
			},
		},
		"GET /api/users": {
			id: "listUsers", tags: []string{"admin"}, summary: "List every account",
			doc: "Admin only.",
			replies: []reply{
				{status: 200, of: list[listedUserView]{}, doc: "Every account."},
				{status: 401},
				{status: 403},
			},
		},
		"POST /api/users/{id}/disable": {
			id: "disableUser", tags: []string{"admin"}, summary: "Disable an account",
			doc: "Admin only. Disabling ends every session of the account at once; its API tokens stop " +
				"working while it stays disabled. 409 for the caller's own account. Takes no body.",
			replies: []reply{
				{status: 200, of: userAnswer{}, doc: "The account, now disabled."},
				{status: 401},
				{status: 403},
				{status: 404},
				{status: 409},
			},
		},
		"POST /api/users/{id}/enable": {
			id: "enableUser", tags: []string{"admin"}, summary: "Re-enable an account",
			doc: "Admin only. Takes no body.",
			replies: []reply{
				{status: 200, of: userAnswer{}, doc: "The account, now enabled."},
				{status: 401},
				{status: 403},
				{status: 404},
			},
		},
		"POST /api/invites": {
			id: "createInvite", tags: []string{"admin"}, summary: "Create a signup invite",
			doc: "Admin only. Makes a single-use invite for servers whose signup mode is `invite`; the token " +
				"is shown once. Takes no body.",
			replies: []reply{
				{status: 201, of: inviteView{}, doc: "The new invite."},
				{status: 401},
				{status: 403},
			},
		},
		"GET /api/agents": {
			id: "listAgents", tags: []string{"agents"}, summary: "List the agents you can see",
			doc: "Any signed-in user: the agents the caller can see, each with the caller's `access`.",
			replies: []reply{
				{status: 200, of: list[agentView]{}, doc: "The agents."},
				{status: 401},
			},
		},
		"POST /api/agents": {
			id: "createAgent", tags: []string{"agents"}, summary: "Create an agent",
			doc: "Any signed-in user: the caller owns the new agent. `name` is required; absent fields take " +
				"the default.",
			body: &body{of: agentRequest{}, require: []string{"name"}},
			replies: []reply{
				{status: 201, of: agentView{}, doc: "The new agent."},
				{status: 400},
				{status: 401},
				{status: 413},
			},
		},
		"GET /api/agents/{id}": {
			id: "getAgent", tags: []string{"agents"}, summary: "Get an agent",
			doc: "viewer+.",
			replies: []reply{
				{status: 200, of: agentView{}, doc: "The agent."},
				{status: 401},
				{status: 404},
			},
		},
		"PATCH /api/agents/{id}": {
			id: "updateAgent", tags: []string{"agents"}, summary: "Change an agent's settings",
			doc: "editor+ (owner for budget). Absent fields are left as they are. A lower level that can see " +
				"the agent gets 403.",
			body: &body{of: agentRequest{}},
			replies: []reply{
				{status: 200, of: agentView{}, doc: "The agent as changed."},
				{status: 400},
				{status: 401},
				{status: 403},
				{status: 404},
				{status: 413},
			},
		},
		"DELETE /api/agents/{id}": {
			id: "deleteAgent", tags: []string{"agents"}, summary: "Delete an agent",
			doc: "owner. Deletes the agent and everything that belongs to it.",
			replies: []reply{
				{status: 204, doc: "The agent is deleted."},
				{status: 401},
				{status: 403},
				{status: 404},
			},
		},
		"POST /api/agents/{id}/release": {
			id: "releaseAgent", tags: []string{"agents"}, summary: "Lift a quarantine",
			doc: "owner. Lifts a quarantine: the agent becomes `active`, or `paused` when its budget is " +
				"reached. An agent that is not quarantined is returned unchanged. Takes no body.",
			replies: []reply{
				{status: 200, of: agentView{}, doc: "The agent."},
				{status: 401},
				{status: 403},
				{status: 404},
			},
		},
		"POST /api/agents/{id}/accept": {
			id: "acceptAgent", tags: []string{"sharing"}, summary: "Accept a shared agent as a delegation target",
			doc: "The grantee, signed in. A grant gives access at once, but someone else's agent becomes a " +
				"target of the caller's runs' delegation (`list_agents`, `delegate`, in the built-in loop " +
				"and an agent CLI's tools) only once the caller accepts it here; joining a share link of " +
				"the agent counts as accepting it, and the agents the caller owns always are targets. Until " +
				"then, a delegate to it is answered as for an agent that does not exist. Accepting twice is " +
				"fine, and the owner is answered 204 too. 404, exactly as for a missing agent, when the " +
				"caller has no grant or joined link on it. Takes no body.",
			replies: []reply{
				{status: 204, doc: "Accepted."},
				{status: 401},
				{status: 404},
			},
		},
		"GET /api/agents/{id}/grants": {
			id: "listGrants", tags: []string{"sharing"}, summary: "List who the agent is shared with",
			doc: "owner.",
			replies: []reply{
				{status: 200, of: list[grantView]{}, doc: "The grants."},
				{status: 401},
				{status: 403},
				{status: 404},
			},
		},
		"POST /api/agents/{id}/grants": {
			id: "grantByEmail", tags: []string{"sharing"}, summary: "Share the agent with someone by email",
			doc: "owner. Gives the account with this email `viewer`, `runner` or `editor`, or changes its " +
				"level. 404 when no account has the address (signup already tells whether an address is " +
				"taken); 409 for the owner.",
			body: &body{of: emailGrantRequest{}},
			replies: []reply{
				{status: 200, of: grantView{}, doc: "The grant."},
				{status: 400},
				{status: 401},
				{status: 403},
				{status: 404},
				{status: 409},
				{status: 413},
			},
		},
		"PUT /api/agents/{id}/grants/{user_id}": {
			id: "putGrant", tags: []string{"sharing"}, summary: "Give a user a level on the agent",
			doc: "owner. Gives the user `viewer`, `runner` or `editor`, or changes their level. 404 for an " +
				"unknown user; 409 for the owner, who already has full access.",
			body: &body{of: levelRequest{}},
			replies: []reply{
				{status: 200, of: grantView{}, doc: "The grant."},
				{status: 400},
				{status: 401},
				{status: 403},
				{status: 404},
				{status: 409},
				{status: 413},
			},
		},
		"DELETE /api/agents/{id}/grants/{user_id}": {
			id: "deleteGrant", tags: []string{"sharing"}, summary: "Revoke a user's grant",
			doc: "owner. Takes effect on the grantee's next request. 404 when the user holds no grant.",
			replies: []reply{
				{status: 204, doc: "The grant is revoked."},
				{status: 401},
				{status: 403},
				{status: 404},
			},
		},
		"GET /api/agents/{id}/links": {
			id: "listLinks", tags: []string{"sharing"}, summary: "List the agent's share links",
			doc: "owner. Never shows the links' tokens.",
			replies: []reply{
				{status: 200, of: list[linkView]{}, doc: "The links, without `token`."},
				{status: 401},
				{status: 403},
				{status: 404},
			},
		},
		"POST /api/agents/{id}/links": {
			id: "createLink", tags: []string{"sharing"}, summary: "Create a share link",
			doc: "owner. Links give at most `runner`: editing is granted to people by name. The token is in " +
				"this answer only.",
			body: &body{of: levelRequest{}, also: linkLevels(), doc: "`{level: \"viewer\"|\"runner\"}`"},
			replies: []reply{
				{status: 201, of: linkView{}, require: []string{"token"}, doc: "The new link, with its token."},
				{status: 400},
				{status: 401},
				{status: 403},
				{status: 404},
				{status: 413},
			},
		},
		"DELETE /api/agents/{id}/links/{link_id}": {
			id: "deleteLink", tags: []string{"sharing"}, summary: "Delete a share link",
			doc: "owner. Ends the access of everyone who joined through the link, on their next request.",
			replies: []reply{
				{status: 204, doc: "The link is deleted."},
				{status: 401},
				{status: 403},
				{status: 404},
			},
		},
		"POST /api/links/{token}/accept": {
			id: "acceptLink", tags: []string{"sharing"}, summary: "Accept a share link",
			doc: "Any signed-in user: the caller gains the link's level for as long as the link lives; " +
				"deleting the link ends the access of everyone who joined through it, on their next " +
				"request. 404 for an unknown or deleted link. Takes no body.",
			replies: []reply{
				{status: 200, of: agentView{}, doc: "The agent as the caller now sees it."},
				{status: 401},
				{status: 404},
			},
		},
		"GET /api/agents/{id}/messages": {
			id: "listMessages", tags: []string{"messages"}, summary: "Read the agent's thread",
			doc: "viewer+. A page of the thread, oldest first: the newest `limit` messages (default 100) " +
				"written before `before` (the newest when absent). 404 also when `before` is not a message " +
				"of this agent.",
			query: []*openapi.Parameter{
				{Name: "before", In: "query", Schema: &openapi.Schema{Type: openapi.Types{"string"}}, Description: "A message id: return the messages written before it."},
				{Name: "limit", In: "query", Schema: &openapi.Schema{Type: openapi.Types{"integer"}, Minimum: openapi.Int(1), Maximum: openapi.Int(1000), Default: 100}, Description: "How many messages, 1 to 1000 (default 100); anything else is 400."},
			},
			replies: []reply{
				{status: 200, of: list[messageView]{}, doc: "The messages, oldest first."},
				{status: 400},
				{status: 401},
				{status: 404},
			},
		},
		"POST /api/agents/{id}/messages": {
			id: "postMessage", tags: []string{"messages"}, summary: "Post a message",
			doc: "runner+. Adds the caller's message to the agent's thread and starts a run for it, if " +
				"admission allows. The run goes on in the background: follow it with `GET " +
				"/api/runs/{id}/events`.",
			body: &body{of: messageRequest{}},
			replies: []reply{
				{status: 202, of: postedMessage{}, doc: "The message is admitted and its run started."},
				{status: 400},
				{status: 401},
				{status: 403},
				{status: 404},
				{status: 413},
				{status: 422},
				{status: 503},
			},
		},
		"GET /api/openapi.json": {
			id: "getOpenAPI", tags: []string{"meta"}, summary: "This document",
			doc: "No sign-in needed. The OpenAPI document of this API.",
			replies: []reply{
				{status: 200, schema: openapi.Of("object"), doc: "The OpenAPI 3.1 document."},
			},
		},
		"GET /api/credentials": {
			id: "listCredentials", tags: []string{"credentials"}, summary: "List your code-host credentials",
			doc: "Any signed-in user: lists the caller's own credentials, newest first, never their secrets.",
			replies: []reply{
				{status: 200, of: list[credentialView]{}, doc: "The caller's credentials."},
				{status: 401},
				{status: 503, of: errorBody{}, doc: "503 `unavailable`: the server keeps no credentials (started without a secret key)."},
			},
		},
		"POST /api/credentials": {
			id: "createCredential", tags: []string{"credentials"}, summary: "Add a code-host credential",
			doc: "Any signed-in user: stores a credential of the caller, its secret sealed with the server's " +
				"secret key (XChaCha20-Poly1305, bound to the row). The secret is never answered, logged or " +
				"traced, and never enters a sandbox. A push of an agent uses a credential of the agent's " +
				"owner for the remote's host, never the pusher's.",
			body: &body{of: credentialRequest{}},
			replies: []reply{
				{status: 201, of: credentialView{}, doc: "The new credential, without its secret."},
				{status: 400},
				{status: 401},
				{status: 409},
				{status: 413},
				{status: 503, of: errorBody{}, doc: "503 `unavailable`: the server keeps no credentials (started without a secret key)."},
			},
		},
		"PATCH /api/credentials/{id}": {
			id: "patchCredential", tags: []string{"credentials"}, summary: "Set the repositories a code-host credential may be used for",
			doc: "Its owner only: another user's credential is 404, like a missing one. A pattern not on the " +
				"credential's host, or malformed, is 400.",
			body: &body{of: credentialPatch{}},
			replies: []reply{
				{status: 200, of: credentialView{}, doc: "The credential as it now is."},
				{status: 400},
				{status: 401},
				{status: 404},
				{status: 503, of: errorBody{}, doc: "503 `unavailable`: the server keeps no credentials (started without a secret key)."},
			},
		},
		"DELETE /api/credentials/{id}": {
			id: "deleteCredential", tags: []string{"credentials"}, summary: "Delete a code-host credential",
			doc: "Any signed-in user, for their own credentials: another user's credential is 404, like a " +
				"missing one.",
			replies: []reply{
				{status: 204, doc: "The credential is deleted."},
				{status: 401},
				{status: 404},
				{status: 503, of: errorBody{}, doc: "503 `unavailable`: the server keeps no credentials (started without a secret key)."},
			},
		},
		"GET /api/nodes": {
			id: "listNodes", tags: []string{"nodes"}, summary: "List the sandbox nodes",
			doc: "Admins only. In role all (no nodes) it answers 503 saying so.",
			replies: []reply{
				{status: 200, of: list[nodeView]{}, doc: "The nodes."},
				{status: 401},
				{status: 403},
				{status: 503},
			},
		},
		"POST /api/nodes/{id}/drain": {
			id: "drainNode", tags: []string{"nodes"}, summary: "Drain a node",
			doc: "Admins only. No new agent is placed on it and no new run starts there; what runs there goes on.",
			replies: []reply{
				{status: 204, doc: "Draining."},
				{status: 401},
				{status: 403},
				{status: 404},
				{status: 503},
			},
		},
		"DELETE /api/nodes/{id}/drain": {
			id: "undrainNode", tags: []string{"nodes"}, summary: "Stop draining a node",
			doc: "Admins only. The node takes new agents and runs again.",
			replies: []reply{
				{status: 204, doc: "Ready again."},
				{status: 401},
				{status: 403},
				{status: 404},
				{status: 503},
			},
		},
		"POST /api/nodes/{id}/agents": {
			id: "moveAgent", tags: []string{"nodes"}, summary: "Move an agent to a node",
			doc: "Admins only. The agent's workspace is carried to the node (all of it or nothing), and the " +
				"agent with it; its old node drops its copy. Only an agent with no run under way and no " +
				"change set waiting for review moves.",
			body: &body{of: moveRequest{}},
			replies: []reply{
				{status: 204, doc: "Moved."},
				{status: 400},
				{status: 401},
				{status: 403},
				{status: 404},
				{status: 409},
				{status: 503},
			},
		},
		"GET /api/setup": {
			id: "getSetup", tags: []string{"accounts"}, summary: "Whether the server is brand new",
			doc: "No sign-in needed. Says whether any account exists yet (the first one made administers the " +
				"server) and the signup mode; nothing else (no counts, no emails).",
			replies: []reply{
				{status: 200, of: setupView{}, doc: "The server's setup."},
			},
		},
		"GET /api/models": {
			id: "listModels", tags: []string{"agents"}, summary: "The models an agent may be set to",
			doc: "Any signed-in user. The server's default model, then the others its model provider lists; " +
				"a provider that does not list its models gives the default alone and `listed: false`. With " +
				"no provider configured: an empty list and `configured: false`, not an error.",
			replies: []reply{
				{status: 200, of: modelsView{}, doc: "The models."},
				{status: 401},
				{status: 503},
			},
		},
		"GET /api/limits": {
			id: "getLimits", tags: []string{"agents"}, summary: "What an agent's limits are when left 0",
			doc: "Any signed-in user. The defaults admission, the runner and the sandbox apply to a limit an " +
				"agent leaves 0 (null: no limit), and the most each may be set to.",
			replies: []reply{
				{status: 200, of: limitsAnswer{}, doc: "The defaults and bounds."},
				{status: 401},
			},
		},
	}
	maps.Copy(ops, workOperations())
	maps.Copy(ops, opsOperations())
	return ops
}

// linkLevels narrows a level to those a share link may give.
func linkLevels() *openapi.Schema {
	p := &openapi.Map[*openapi.Schema]{}
	p.Set("level", &openapi.Schema{Enum: openapi.Enum("viewer", "runner")})
	return &openapi.Schema{Properties: p}
}
