package api

import (
	"cmp"
	"maps"
	"slices"

	"corral"
	"corral/internal/openapi"
	"corral/internal/service"
)

// components are the schemas the document names: each view the server
// encodes and each request it decodes, with what reflection cannot see.
func components() []openapi.Component {
	// The most each limit may be set to, as the service enforces it.
	most := (&service.Runs{}).Limits().Max
	return append([]openapi.Component{
		{Name: "User", Of: userView{}, Doc: "An account. Never carries a password hash or any other secret.",
			Fields: map[string]openapi.Schema{
				"id": {Description: "The account's id (opaque)."},
				"email": {Format: "email", Description: "The email address in the one form accounts are stored and compared in: trimmed, Unicode " +
					"NFC, lower-cased."},
				"name":  {Description: "The display name."},
				"admin": {Description: "Whether the account is an administrator. The first account becomes admin."},
				"disabled": {Description: "Whether the account is disabled: a disabled account cannot sign in and its API tokens stop " +
					"working."},
				"created_at": {Format: "date-time", Description: "When the account was created (RFC 3339, UTC)."},
			},
		},
		{Name: "ListedUser", Of: listedUserView{}, Doc: "An account in the administrators' list.",
			Fields: map[string]openapi.Schema{
				"email_ascii": {Description: "The email with its domain in ASCII (punycode, without IDNA mapping), present only when the " +
					"domain is not ASCII, so that a domain that only looks like a familiar one stands out: " +
					"`ada@exаmple.com` (a Cyrillic а) is `ada@xn--exmple-4nf.com`. The local part is left as it " +
					"is."},
				"email_mixed_script": {Description: "The local part, or one label of the domain, mixes letters of more than one script " +
					"(`vіctim@example.com` with a Cyrillic і): a look-alike of another address. Han, Hiragana, " +
					"Katakana and Hangul count as one."},
			},
		},
		{Name: "UserAnswer", Of: userAnswer{}, Doc: "The answer that carries one account: `{user}`."},
		{Name: "UserRef", Of: userRefView{}, Doc: "A user named where an email would say too much (an agent's owner, a message's author).",
			Fields: map[string]openapi.Schema{
				"id":   {Description: "The user's id."},
				"name": {Description: "The user's display name."},
			},
		},
		{Name: "Contact", Of: contactView{}, Doc: "A user as an agent's owner sees the people it is shared with.",
			Fields: map[string]openapi.Schema{
				"id":    {Description: "The user's id."},
				"email": {Format: "email", Description: "The user's email address."},
				"name":  {Description: "The user's display name."},
			},
		},
		{Name: "Policy", Of: policyView{}, Doc: "What an agent's runs may do.",
			Fields: map[string]openapi.Schema{
				"fs":      {Enum: openapi.Enum("read-only", "read-write"), Description: "Whether a run may write its workspace (writes land in a staged copy)."},
				"changes": {Enum: openapi.Enum("review", "auto"), Description: "Whether a run's changes wait for a person's review or apply on their own."},
				"network": {Enum: openapi.Enum("none", "allowlist"), Description: "A run's network access: `none` (the default) reaches " +
					"nothing but Corral's gateway; `allowlist` gives every process of the run the egress proxy at " +
					"`HTTP_PROXY`/`HTTPS_PROXY` (`http://127.0.0.1:41301` inside the sandbox), which reaches the hosts of " +
					"`egress` and nothing else. There is no DNS inside: the proxy resolves."},
				"egress": {Description: "The allow-list `allowlist` reaches: `presets` (see GET /api/egress/presets) and `allow`, " +
					"each a host (`registry.example.com`, an IP address, or `*.example.com` for the hosts under it) with " +
					"optional `ports` (default 80 and 443), `methods` and path prefixes `paths` (default any; a rule " +
					"that names either is checked per request, so its HTTPS is terminated by the proxy). Edits apply " +
					"to a run's next connection. An agent created by a run's create_agent has its parent's."},
				"exclude":   {MaxItems: openapi.Int(64), Description: "Globs of files (secrets) left out of every staged tree, on top of .env, .env.* and .corral."},
				"protected": {MaxItems: openapi.Int(64), Description: "Globs of paths whose changes are denied, on top of the built-in rules."},
				"risky":     {MaxItems: openapi.Int(64), Description: "Globs of paths whose changes always wait for a person, on top of the built-in rules."},
				"library": {Description: "Whether the shared library (documents any user publishes) is searched for this agent, for " +
					"the message that starts a run and by search_documents, besides its private documents. " +
					"Library passages reach the model marked as untrusted reference material. Default false for " +
					"a new agent; an agent created by a run's create_agent has its parent's; agents that " +
					"existed before this setting keep true."},
			},
		},
		{Name: "Limits", Of: limitsView{}, Doc: "Bounds on each run of an agent. 0 means the server default.",
			Fields: map[string]openapi.Schema{
				"max_prompt_bytes": {Minimum: openapi.Int(0), Description: "Largest prompt a run may send, in bytes. 0 means the server default."},
				"max_runs":         {Minimum: openapi.Int(0), Description: "Most runs the agent may have. 0 means the server default."},
				"run_timeout_s":    {Minimum: openapi.Int(0), Description: "Wall-clock limit of one run, in seconds. 0 means the server default."},
				"cpu_millis":       {Minimum: openapi.Int(0), Description: "CPU a run may use, in thousandths of a core. 0 means the server default."},
				"memory_bytes":     {Minimum: openapi.Int(0), Description: "Memory a run may use, in bytes. 0 means the server default."},
				"pids":             {Minimum: openapi.Int(0), Description: "Most processes a run may have at once. 0 means the server default."},
				"output_bytes":     {Minimum: openapi.Int(0), Description: "Most output a run may produce, in bytes. 0 means the server default."},
				"disk_bytes": {Minimum: openapi.Int(0), Description: "Most bytes one run may write into its staged tree (its own filesystem: a write past it " +
					"fails with ENOSPC, and the run ends with violation `disk`). 0 means the server default, 1 " +
					"GiB."},
				"disk_inodes": {Minimum: openapi.Int(0), Description: "Most files (directories, symlinks and deletions included) one run may make in its staged " +
					"tree; past it a new file fails with ENOSPC and the run ends with violation `disk`. 0 means " +
					"the server default, 100,000."},
				"pending_disk_bytes": {Minimum: openapi.Int(0), Description: "Most bytes the agent's change sets waiting for review may hold on the server's disk; at " +
					"it, new messages are refused with `disk_quota`. 0 means the server default, 4 GiB."},
			},
		},
		{Name: "Budget", Of: budgetView{}, Doc: "An agent's token budget: `{tokens, used, reserved, left}` (tokens 0 = unlimited). Each " +
			"model call reserves its ceiling (its request's bytes plus the output cap it is sent with) " +
			"before it is sent and settles on the provider's usage, so used never passes tokens.",
			Fields: map[string]openapi.Schema{
				"tokens":   {Minimum: openapi.Int(0), Description: "The agent's token allowance; 0 means unlimited."},
				"used":     {Minimum: openapi.Int(0), Description: "The tokens used so far, and those carved out for agents its runs created."},
				"reserved": {Minimum: openapi.Int(0), Description: "The ceilings of the model calls in flight."},
				"left":     {Minimum: openapi.Int(0), Description: "What a new call may still reserve: tokens - used - reserved; null for an unlimited budget."},
			},
		},
		{Name: "Agent", Of: agentView{}, Doc: "A configured coding agent owned by one user. Levels: `viewer` reads the agent, its " +
			"messages, runs, traces and change sets; `runner` also sends messages and stops its own " +
			"runs; `editor` also changes instructions, policy and limits and decides change sets; " +
			"`owner` also shares, sets the budget and deletes.",
			Fields: map[string]openapi.Schema{
				"id":           {Description: "The agent's id."},
				"name":         {Description: "The agent's name."},
				"instructions": {Description: "The agent's instructions."},
				"model":        {Description: "The model the agent uses; \"\" means the server's default model."},
				"driver": {Enum: openapi.Enum(corral.AgentDrivers...), Description: "What runs the agent: `builtin` (Corral's own loop, the default) or an agent CLI run inside " +
					"the run's sandbox on the message (`codex`, `claude-code`, `opencode`), its model calls " +
					"going only to Corral's gateway."},
				"access": {Enum: levels(corral.LevelOwner, corral.LevelEditor, corral.LevelRunner, corral.LevelViewer), Description: "The caller's level on this agent."},
				"accepted": {Description: "Whether the caller accepted the agent as a delegation target of their runs: always true " +
					"for its owner; for an agent shared with the caller, once they accepted it (POST " +
					"/api/agents/{id}/accept) or joined a share link of it."},
				"state":      {Enum: openapi.Enum("active", "paused", "quarantined"), Description: "`active`, `paused` (budget reached) or `quarantined`."},
				"created_at": {Format: "date-time", Description: "When the agent was created (RFC 3339, UTC)."},
				"updated_at": {Format: "date-time", Description: "When the agent's settings last changed (RFC 3339, UTC)."},
				"pending_changes": {Minimum: openapi.Int(0), Description: "How many of the agent's change sets wait for a person (status `pending`), whoever may " +
					"decide them. Counted in the same read as the agent."},
			},
		},
		{Name: "Can", Of: canView{}}, // its description is its OpenAPISchema's
		{Name: "Grant", Of: grantView{}, Doc: "One user's level on one agent.",
			Fields: map[string]openapi.Schema{
				"level":      {Enum: levels(corral.LevelViewer, corral.LevelRunner, corral.LevelEditor), Description: "The level the grant gives."},
				"created_at": {Format: "date-time", Description: "When the grant was given or last changed (RFC 3339, UTC)."},
				"accepted": {Description: "Whether the user accepted the agent as a delegation target of their runs (POST " +
					"/api/agents/{id}/accept, or by joining a share link of it). Until then the grant gives its " +
					"access, but the user's runs cannot list or delegate to the agent. Grants made before this " +
					"field existed are not accepted."},
			},
		},
		{Name: "Link", Of: linkView{}, Doc: "A share link. Whoever holds its token and accepts it while signed in gains its level for " +
			"as long as the link lives; deleting the link ends the access of everyone who joined " +
			"through it, on their next request.",
			Fields: map[string]openapi.Schema{
				"id":         {Description: "The link's id."},
				"level":      {Enum: levels(corral.LevelViewer, corral.LevelRunner), Description: "The level whoever accepts the link gains."},
				"token":      {Description: "The link's secret token: only in the answer that creates the link, never again."},
				"created_at": {Format: "date-time", Description: "When the link was created (RFC 3339, UTC)."},
			},
		},
		{Name: "Token", Of: tokenView{}, Doc: "A personal API token for scripts. Only a hash of the secret is kept.",
			Fields: map[string]openapi.Schema{
				"id":   {Description: "The token's id."},
				"name": {Description: "The token's name."},
				"token": {Description: "The secret to send as `Authorization: Bearer <token>`: only in the answer that creates the " +
					"token (it is shown once)."},
				"created_at":   {Format: "date-time", Description: "When the token was created (RFC 3339, UTC)."},
				"last_used_at": {Format: "date-time", Description: "When the token was last used (RFC 3339, UTC); null when never used."},
			},
		},
		{Name: "Invite", Of: inviteView{}, Doc: "A single-use signup invite, for servers whose signup mode is `invite`.",
			Fields: map[string]openapi.Schema{
				"id":         {Description: "The invite's id."},
				"token":      {Description: "The single-use invite token to pass as `invite` at signup; shown once."},
				"expires_at": {Format: "date-time", Description: "When the invite stops being valid (RFC 3339, UTC)."},
			},
		},
		{Name: "Message", Of: messageView{}, Doc: "One entry in an agent's thread.",
			Fields: map[string]openapi.Schema{
				"id":         {Description: "The message's id; pass it as `before` to page back."},
				"role":       {Enum: openapi.Enum("user", "assistant"), Description: "Who the message is from."},
				"content":    {Description: "The message text, stored byte for byte."},
				"author":     {Description: "The person who wrote it; null for messages not written by a person."},
				"run_id":     {Description: "The run the message belongs to; null when none."},
				"created_at": {Format: "date-time", Description: "When the message was posted (RFC 3339, UTC)."},
				"sources": {Description: "On an answer that drew on documents: each document its run retrieved from with an " +
					"answerable confidence, best first. Absent otherwise."},
			},
		},
		{Name: "PostedMessage", Of: postedMessage{}, Doc: "The answer to posting a message: `{message, run}`.",
			Fields: map[string]openapi.Schema{
				"run": {Description: "The admitted run the message started."},
			},
		},
		{Name: "Error", Of: errorBody{}, Doc: "Every error: `{\"error\": {\"code\": \"<machine code>\", \"message\": \"<human text>\"}}`.",
			Fields: map[string]openapi.Schema{
				"error.code":    {Enum: errorCodes(), Description: "The machine code; clients match on it."},
				"error.message": {Description: "The human text."},
				"error.reason":  {Description: "Refines `admission_denied` (for example `prompt_too_large`, `busy`); absent otherwise."},
			},
		},
		{Name: "SignupRequest", Of: signupRequest{}, Request: true, Doc: "The body of signup.",
			Fields: map[string]openapi.Schema{
				"email": {MaxLength: openapi.Int(254), Description: "An email address (one @, a domain of at least two labels, no whitespace, at most 254 " +
					"bytes); stored trimmed, in Unicode NFC and lower-cased, so two spellings of one address " +
					"are one account."},
				"name": {MinLength: openapi.Int(1), MaxLength: openapi.Int(100), Description: "The display name: 1 to 100 characters after trimming, no control, bidirectional or " +
					"invisible characters."},
				"password": {MinLength: openapi.Int(8), Description: "At least 8 characters, at most 1024 bytes, valid UTF-8, no NUL."},
				"invite":   {Description: "An invite token; required when the server's signup mode is `invite`, ignored otherwise."},
			},
		},
		{Name: "LoginRequest", Of: loginRequest{}, Request: true, Doc: "The body of login.",
			Fields: map[string]openapi.Schema{
				"email":    {Description: "The account's email address."},
				"password": {Description: "The account's password."},
			},
		},
		{Name: "TokenRequest", Of: tokenRequest{}, Request: true, Doc: "The body of creating an API token.",
			Fields: map[string]openapi.Schema{
				"name": {MinLength: openapi.Int(1), Description: "A name: 1 to 255 bytes of UTF-8 (stored in NFC form); no / or \\, no \"..\", no control, " +
					"bidirectional or invisible characters, none of < > : \" | ? *, not .git in any spelling, " +
					"no dot or space at either end, not a Windows device name (CON, NUL, COM1, ...). A broken " +
					"rule answers 400 invalid_name."},
			},
		},
		{Name: "AgentRequest", Of: agentRequest{}, Request: true, Doc: "The body of creating and updating an agent. Every field is optional: absent fields are " +
			"left as they are (on create: take the default). Unknown fields are refused.",
			Fields: map[string]openapi.Schema{
				"name": {MinLength: openapi.Int(1), Description: "The agent's name (required on create). A name: 1 to 255 bytes of UTF-8 (stored in NFC " +
					"form); no / or \\, no \"..\", no control, bidirectional or invisible characters, none of < " +
					"> : \" | ? *, not .git in any spelling, no dot or space at either end, not a Windows " +
					"device name (CON, NUL, COM1, ...). A broken rule answers 400 invalid_name."},
				"instructions": {Description: "The agent's instructions. Free text, at most 65536 bytes (413 too_large past that), valid " +
					"UTF-8 and without NUL (400 invalid_content otherwise); may be empty."},
				"model": {MaxLength: openapi.Int(200), Pattern: "^[A-Za-z0-9._:/@+-]*$", Description: "The model the agent uses: \"\" means the server's default model; otherwise 1 to 200 ASCII " +
					"letters, digits and - _ . : / @ +."},
				"driver": {Enum: openapi.Enum(corral.AgentDrivers...), Description: "What runs the agent: `builtin` (Corral's own loop, the default) or an agent CLI run inside " +
					"the run's sandbox on the message (`codex`, `claude-code`, `opencode`), its model calls " +
					"going only to Corral's gateway."},
				"policy": {Description: "Policy fields to set; absent ones are left as they are (on create: `read-write`, `review`, " +
					"`none`, library false)."},
				"policy.fs":               {Enum: openapi.Enum("read-only", "read-write")},
				"policy.changes":          {Enum: openapi.Enum("review", "auto")},
				"policy.network":          {Enum: openapi.Enum("none", "allowlist")},
				"policy.egress":           {Description: "The whole allow-list, replacing the one there is: `{allow: [{host, ports?, methods?, paths?}], presets?: [...]}`; at most 100 rules."},
				"policy.exclude":          {MaxItems: openapi.Int(64), Description: "Globs of files (secrets) left out of every staged tree, on top of .env, .env.* and .corral."},
				"policy.protected":        {MaxItems: openapi.Int(64), Description: "Globs of paths whose changes are denied, on top of the built-in rules."},
				"policy.risky":            {MaxItems: openapi.Int(64), Description: "Globs of paths whose changes always wait for a person, on top of the built-in rules."},
				"policy.library":          {Description: "Search the shared library for this agent (default false)."},
				"limits":                  {Description: "Limits to set; absent ones are left as they are (on create: 0, the server default)."},
				"limits.max_prompt_bytes": {Minimum: openapi.Int(0), Maximum: &most.MaxPromptBytes, Description: "Largest prompt a run may send, in bytes. 0 means the server default."},
				"limits.max_runs":         {Minimum: openapi.Int(0), Maximum: &most.MaxRuns, Description: "Most runs the agent may have. 0 means the server default."},
				"limits.run_timeout_s":    {Minimum: openapi.Int(0), Maximum: &most.RunTimeoutS, Description: "Wall-clock limit of one run, in seconds. 0 means the server default."},
				"limits.cpu_millis":       {Minimum: openapi.Int(0), Maximum: &most.CPUMillis, Description: "CPU a run may use, in thousandths of a core. 0 means the server default."},
				"limits.memory_bytes":     {Minimum: openapi.Int(0), Maximum: &most.MemoryBytes, Description: "Memory a run may use, in bytes. 0 means the server default."},
				"limits.pids":             {Minimum: openapi.Int(0), Maximum: &most.Pids, Description: "Most processes a run may have at once. 0 means the server default."},
				"limits.output_bytes":     {Minimum: openapi.Int(0), Maximum: &most.OutputBytes, Description: "Most output a run may produce, in bytes. 0 means the server default."},
				"limits.disk_bytes":       {Minimum: openapi.Int(0), Maximum: &most.DiskBytes, Description: "Most bytes one run may write into its staged tree. 0 means the server default (1 GiB)."},
				"limits.disk_inodes":      {Minimum: openapi.Int(0), Maximum: &most.DiskInodes, Description: "Most files one run may make in its staged tree. 0 means the server default (100,000)."},
				"limits.pending_disk_bytes": {Minimum: openapi.Int(0), Maximum: &most.PendingDiskBytes, Description: "Most bytes the agent's pending change sets may hold on disk before messages are refused " +
					"(`disk_quota`). 0 means the server default (4 GiB)."},
				"budget":        {Description: "The budget to set. `used` is not settable and is refused as an unknown field."},
				"budget.tokens": {Minimum: openapi.Int(0), Maximum: openapi.Int(1125899906842624), Description: "The token allowance; 0 means unlimited. Only the owner may set it."},
			},
		},
		{Name: "LevelRequest", Of: levelRequest{}, Request: true, Doc: "The body of giving a grant or creating a share link.",
			Fields: map[string]openapi.Schema{
				"level": {Enum: levels(corral.LevelViewer, corral.LevelRunner, corral.LevelEditor), Description: "A level: `viewer`, `runner` or `editor` for a grant; `viewer` or `runner` for a link."},
			},
		},
		{Name: "MessageRequest", Of: messageRequest{}, Request: true, Doc: "The body of posting a message.",
			Fields: map[string]openapi.Schema{
				"content": {MinLength: openapi.Int(1), Description: "The message: at most 262144 bytes (413 too_large past that), valid UTF-8, no NUL, not " +
					"empty or all whitespace (400 invalid_content otherwise)."},
			},
		},
		{Name: "ChangeEntry", Of: changeEntryView{}, Doc: "",
			Fields: map[string]openapi.Schema{
				"path": {Description: "Slash-separated, relative to the workspace; the key for a partial decision. For an entry " +
					"flagged name (a name that breaks the path rules, never applied) it is the escaped form, " +
					"like path_escaped."},
				"path_escaped": {Description: "The name exactly as it is on disk, with every control, invisible or bidirectional " +
					"character and every byte that is not UTF-8 escaped Go-style (\\n, \\x1b, \\u202e, \\xff; a " +
					"backslash is \\\\). Equal to path for plain names: show this one to people."},
				"op": {Enum: openapi.Enum("create", "modify", "delete")},
				"old_sha256": {Description: "SHA-256 of the file as the run saw it (as it was in the workspace when the run was staged, " +
					"or before an edit made while the run worked); empty for create. Approval checks the " +
					"workspace against it."},
				"new_sha256": {Description: "SHA-256 of the staged file; empty for delete."},
				"mode":       {Description: "The staged file's mode, e.g. -rw-r--r--."},
				"class":      {Enum: openapi.Enum("ordinary", "risky", "protected")},
				"flags": {Items: &openapi.Schema{Enum: openapi.Enum("symlink", "hardlink", "device", "setuid", "escape", "internal", "name", "stale", "collision")}, Description: "Facts about the entry. Every flag but collision makes it protected: name (an element " +
					"breaks the path rules), stale (the run deleted a file that appeared while it worked); " +
					"collision (the path is one file with another entry's or an existing file's where names " +
					"ignore case or Unicode normalisation) makes it risky."},
				"note": {Description: "Why the entry is flagged, in words (empty when it is not)."},
				"state": {Enum: openapi.Enum("pending", "applied", "rejected", "denied", "conflicted", "dropped"), Description: "pending until decided; applied; rejected (a person said no); denied (protected); " +
					"conflicted (its file changed in the workspace since the run saw it: not applied); dropped " +
					"(the set expired)."},
				"diff": {Description: "Unified diff of a text entry (up to 1 MiB per file, 8 MiB per change set), made when the " +
					"run ended and kept after the set is applied, rejected or expired. GET /api/changes/{id} " +
					"only; headers carry path_escaped."},
			},
		},
		{Name: "ChangeSet", Of: changeSetView{}, Doc: "",
			Fields: map[string]openapi.Schema{
				"status": {Enum: openapi.Enum("pending", "applied", "rejected", "denied", "conflicted", "expired", "failed"), Description: "pending while any entry is pending; then applied (something was applied), conflicted " +
					"(nothing applied: the workspace changed), rejected, denied (only protected entries), or " +
					"expired. failed only for change sets of earlier versions."},
				"mode": {Enum: openapi.Enum("review", "auto")},
				"disk_bytes": {Description: "What the set's staged tree holds on the server's disk (counted against " +
					"limits.pending_disk_bytes while the set is pending)."},
				"created_at": {Format: "date-time"},
				"expires_at": {Format: "date-time"},
				"decided_at": {Format: "date-time"},
			},
		},
		{Name: "File", Of: fileView{}, Doc: "",
			Fields: map[string]openapi.Schema{
				"type":           {Enum: openapi.Enum("file", "dir")},
				"entries.type":   {Enum: openapi.Enum("file", "dir")},
				"content":        {Description: "The content of a UTF-8 text file."},
				"content_base64": {Description: "The content of any other file."},
			},
		},
		{Name: "Tokens", Of: tokensView{}, Doc: "Model tokens as the provider reported them."},
		{Name: "Run", Of: runView{}, Doc: "One run of an agent.",
			Fields: map[string]openapi.Schema{
				"status":        {Enum: openapi.Enum("admitted", "running", "paused", "completed", "cancelled", "killed", "errored", "reconciled")},
				"triggered_by":  {Description: "Who sent the message; null when the account is gone."},
				"parent_run_id": {Description: "The run whose `delegate` tool started this one; null for a run a person started."},
				"root_run_id": {Description: "The run a person started that this one descends from through delegation; its own id for " +
					"such a run."},
				"depth":         {Minimum: openapi.Int(0), Description: "Delegation hops from the root run: 0 for the root."},
				"message_id":    {Description: "The message that started the run."},
				"change_set_id": {Description: "The change set the run's changes became; null while running and when it changed nothing."},
				"violation": {Enum: openapi.Enum("timeout", "memory", "pids", "cpu", "output", "disk"), Description: "The limit that ended the run, if one did: a sandbox limit, or `disk` (the run used up " +
					"`limits.disk_bytes` or `limits.disk_inodes`)."},
				"reason":     {Description: "Why the run ended as it did, in words."},
				"created_at": {Format: "date-time"},
				"started_at": {Format: "date-time"},
				"ended_at":   {Format: "date-time"},
				"driver": {Enum: runDrivers(), Description: "`builtin`: the agent loop; `terminal`: a person at the run's terminal (no model, no " +
					"message; `message_id` is empty); `codex`, `claude-code`, `opencode`: that agent CLI ran in " +
					"the run's sandbox on the message."},
				"node": {Description: "The sandbox node the run's session ran on (role control); absent on a server that runs its " +
					"sandboxes itself."},
			},
		},
		{Name: "TraceEvent", Of: traceView{}, Doc: "One event of a run's append-only, hash-chained trace. `hash` is SHA-256 over a " +
			"length-prefixed encoding of `corral-trace-v1`, the run id, `seq`, `at` (RFC 3339 with " +
			"nanoseconds, as given), `type`, `data` (the exact JSON text) and `prev_hash`; `corral " +
			"trace verify` checks every chain.",
			Fields: map[string]openapi.Schema{
				"seq":  {Minimum: openapi.Int(1)},
				"at":   {Format: "date-time"},
				"data": {Type: openapi.Types{"object"}, AdditionalProperties: &openapi.Additional{Schema: &openapi.Schema{}}},
				"type": {Enum: traceTypes(), Description: "The event's kind. `usage` is one model call, metered from the provider's report: `data` " +
					"has `input`, `output`, `budget_used`, `budget_tokens`, and for an agent CLI's call through " +
					"the gateway also `protocol` (`chat`, `responses` or `messages`), `model`, `status` (the " +
					"provider's HTTP status; 0 when the provider gave no answer), and when they hold " +
					"`estimated: true` (the provider reported no usage: bytes/4), `aborted: true` (the CLI went " +
					"away mid-answer; the provider's usage was still read), `error`. `gateway_note` says what " +
					"of a CLI's call was left out (`dropped`); `transcript` is one step an agent CLI reported " +
					"(`kind`: model, message, reasoning, tool_call, tool_result, error; bounded text). `retrieved`: " +
					"what a search of the agent's documents found (document and chunk ids, scores and the confidence, never the text). " +
					"`egress_denied`: the egress proxy refused a request of the run (`host`, `port`, `method`, `path` without its query, " +
					"and `rule`: why, in words); `egress`: what the run exchanged with one host once its connections to it closed " +
					"(`host`, `requests`, `bytes_in`, `bytes_out`). " +
					"`cloned`, `clone_failed`, `pushed`, `push_refused`, `synced` and `sync_refused` are an agent's own chain. `delegated`: the run's delegate tool started a child run " +
					"(`run_id`, `agent_id`, `depth`); `delegation_refused`: a delegation tool was refused " +
					"(`tool`, `target`, `error`, and `cap` when a tree cap refused it: `delegation_depth`, " +
					"`delegation_fanout`, `delegation_concurrency`, `delegation_create`); `agent_created`: its " +
					"create_agent tool made an agent (`agent_id`, `name`, `fs`)."},
				"prev_hash": {Description: "\"\" for the first event."},
			},
		},
		{Name: "EmailGrantRequest", Of: emailGrantRequest{}, Request: true, Doc: "",
			Fields: map[string]openapi.Schema{
				"email": {Format: "email"},
				"level": {Enum: levels(corral.LevelViewer, corral.LevelRunner, corral.LevelEditor)},
			},
		},
		{Name: "Import", Of: importView{}, Doc: "What an import wrote.",
			Fields: map[string]openapi.Schema{
				"files": {Description: "Regular files in the archive (created, replaced or already identical)."},
				"bytes": {Description: "Their bytes, uncompressed."},
			},
		},
		{Name: "Credential", Of: credentialView{}, Doc: "A code-host credential of the caller. There is no field for the secret: it is never answered.",
			Fields: map[string]openapi.Schema{
				"id":   {Description: "The credential's id."},
				"name": {Description: "The credential's name, unique among the caller's."},
				"host": {Description: "The host it is sent to, normalised: lower case, IDN in ASCII form, `:port` unless 443, " +
					"IPv6 in brackets."},
				"username": {Description: "The user name sent with the secret (HTTP basic authentication)."},
				"repositories": {Description: "The repositories it may be used for, as patterns host/path in which * stands for any part " +
					"of one segment (`github.com/acme/app`, `github.com/acme/*`; a leading https:// and a " +
					"trailing .git are dropped); on the credential's host. It is used for no other repository, " +
					"by anyone: a clone or push naming it for another answers 403. Empty: it is used for " +
					"nothing."},
				"created_at": {Format: "date-time", Description: "When the credential was added (RFC 3339, UTC)."},
			},
		},
		{Name: "CredentialRequest", Of: credentialRequest{}, Request: true, Doc: "The body of adding a code-host credential.",
			Fields: map[string]openapi.Schema{
				"name": {MinLength: openapi.Int(1), Description: "A name: 1 to 255 bytes of UTF-8 (stored in NFC form); no / or \\, no \"..\", no control, " +
					"bidirectional or invisible characters, none of < > : \" | ? *, not .git in any spelling, " +
					"no dot or space at either end, not a Windows device name (CON, NUL, COM1, ...). A broken " +
					"rule answers 400 invalid_name."},
				"host": {MinLength: openapi.Int(1), Description: "A DNS name or an IP address with an optional port (`github.com`, `git.example.org:8443`, " +
					"`[::1]:8443`): no scheme, user, path or query."},
				"username": {MinLength: openapi.Int(1), MaxLength: openapi.Int(256), Description: "1 to 256 bytes of printable UTF-8: no spaces, control characters or colon. For a " +
					"token-only host, any non-empty name the host accepts (GitHub: your login, or " +
					"`x-access-token`)."},
				"secret": {Format: "password", MinLength: openapi.Int(1), MaxLength: openapi.Int(4096), WriteOnly: true, Description: "The password or token: 1 to 4096 bytes, no NUL and no line break (413 when longer). Stored " +
					"encrypted; never answered again."},
				"repositories": {Description: "The repositories it may be used for, as patterns host/path in which * stands for any part " +
					"of one segment (`github.com/acme/app`, `github.com/acme/*`; a leading https:// and a " +
					"trailing .git are dropped); on the credential's host. It is used for no other repository, " +
					"by anyone: a clone or push naming it for another answers 403. Empty: it is used for " +
					"nothing."},
			},
		},
		{Name: "RepositoryRequest", Of: repositoryRequest{}, Request: true, Doc: "",
			Fields: map[string]openapi.Schema{
				"url":           {Description: "https URL of the repository, without user name or password."},
				"ref":           {Description: "A branch or tag; the remote's default when absent."},
				"credential_id": {Description: "One of the agent owner's credentials; absent: the owner's for the URL's host, if any."},
			},
		},
		{Name: "PushRequest", Of: pushRequest{}, Request: true, Doc: "The body of pushing an agent's repository.",
			Fields: map[string]openapi.Schema{
				"branch": {Description: "The remote branch (git check-ref-format --branch); absent or empty: the repository's " +
					"suggested_branch."},
			},
		},
		{Name: "DecisionRequest", Of: decisionRequest{}, Request: true, Doc: "The optional body of approving or rejecting a change set.",
			Fields: map[string]openapi.Schema{
				"paths": {MinItems: openapi.Int(1), Description: "The entries to decide, by path. Without it (or without a body) every pending entry is decided."},
			},
		},
		{Name: "MoveAgentRequest", Of: moveRequest{}, Request: true, Doc: "The body of moving an agent to a node.",
			Fields: map[string]openapi.Schema{
				"agent_id": {Description: "The agent to move."},
			},
		},
		{Name: "Repository", Of: repositoryView{}, Doc: "An agent's git repository: its persistent workspace is the clone.",
			Fields: map[string]openapi.Schema{
				"ref":    {Description: "The branch or tag cloned."},
				"head":   {Description: "The commit HEAD names; empty until cloned."},
				"status": {Enum: openapi.Enum("cloning", "ready", "failed")},
				"error": {Description: "Why the clone failed, or that the last commit failed (the files were applied; the next " +
					"commit includes them)."},
				"progress":     {Minimum: openapi.Int(0), Maximum: openapi.Int(100), Description: "Percent done while cloning; 100 when ready."},
				"last_push.at": {Format: "date-time"},
				"suggested_branch": {Description: "Where a push that names no branch goes: corral/<the agent's name, lower-case " +
					"letters, digits and dashes>-<the first characters of the agent's id>. The same for every push of the agent."},
			},
		},
		{Name: "Commit", Of: commitView{}, Doc: "",
			Fields: map[string]openapi.Schema{
				"author": {Description: "For an applied change set: the person who sent the message that started the run. The " +
					"committer is Corral."},
				"committed_at": {Format: "date-time"},
				"message": {Description: "For an applied change set: the request that started the run as its subject (on one " +
					"line, at most 72 characters), the agent's final answer (its first 20 lines, at most 2 KiB) and the files " +
					"it changed (the first 50) as its body, and the trailers Corral-Run, Corral-Change-Set and Approved-By."},
				"change_set_id": {Description: "The change set the commit applied (its Corral-Change-Set trailer)."},
			},
		},
		{Name: "PushResult", Of: pushView{}, Doc: "",
			Fields: map[string]openapi.Schema{
				"head":    {Description: "The commit the remote branch names now."},
				"commits": {Description: "How many commits the remote did not have."},
				"pull_request_url": {Format: "uri", Description: "Where a person opens a pull (merge) request of the branch into " +
					"the repository's ref, on a host whose URLs Corral knows: GitHub, GitLab, Gitea or Forgejo (Codeberg), " +
					"Bitbucket. A link, made without asking the host; absent for any other host, or when the branch is the ref."},
			},
		},
		{Name: "SyncResult", Of: syncView{}, Doc: "What a sync did.",
			Fields: map[string]openapi.Schema{
				"head":         {Description: "The commit the workspace's HEAD names now."},
				"upstream":     {Description: "The commit the remote branch named when fetched."},
				"fast_forward": {Description: "True when the workspace held no commit of its own: it moved to upstream, or already held it."},
				"rebased":      {Minimum: openapi.Int(0), Description: "How many of the workspace's own commits were replayed onto upstream."},
				"status":       {Enum: openapi.Enum("up_to_date", "fast_forward", "rebased")},
				"pending": {Description: "The agent's change sets that wait for review. Each stays pending; its entries are checked " +
					"against the new base when it is decided, and an entry whose file the sync changed becomes conflicted " +
					"then (named, not applied), as for a lost update."},
			},
		},
		{Name: "Source", Of: sourceView{}, Doc: "A document an answer drew on.",
			Fields: map[string]openapi.Schema{
				"source":     {Enum: openapi.Enum("private", "library")},
				"score":      {Description: "The best score of its passages, 0 to 1."},
				"confidence": {Description: "The confidence of the retrieval that found it."},
			},
		},
		{Name: "Document", Of: documentView{}, Doc: "An indexed document (its text is not sent back).",
			Fields: map[string]openapi.Schema{
				"name": {Description: "A slash-separated relative path, as uploaded."},
				"source": {Enum: openapi.Enum("private", "library"), Description: "private: one agent's own store; library: the shared store every signed-in user's agents " +
					"draw from. The two are separate files."},
				"chunks":     {Description: "How many passages it was cut into."},
				"embedded":   {Description: "Its passages have embeddings (an embedding model is configured and answered)."},
				"author":     {Description: "Who uploaded it; null when the account is gone."},
				"created_at": {Format: "date-time"},
				"can_delete": {Description: "Whether the caller may delete it."},
			},
		},
		{Name: "Passage", Of: passageView{}, Doc: "",
			Fields: map[string]openapi.Schema{
				"chunk_id": {Description: "<document id>:<its place in the document>."},
				"source":   {Enum: openapi.Enum("private", "library")},
				"heading":  {Description: "The Markdown headings it sits under, \"A > B\"."},
				"score":    {Description: "The calibrated chance, 0 to 1, that the search found an answer when this passage is its best."},
			},
		},
		{Name: "Retrieval", Of: retrievalView{}, Doc: "",
			Fields: map[string]openapi.Schema{
				"items": {Description: "Best first. To a person, also when not answerable (to review); an agent is told only that " +
					"nothing relevant was found."},
				"confidence": {Description: "The best passage's score: the calibrated chance that the search found an answer."},
				"answerable": {Description: "confidence is at least the server's threshold (--retrieval-threshold, 0.5 by default)."},
				"ranker":     {Enum: openapi.Enum("bm25", "fused")},
				"note":       {Description: "Why embeddings were configured but not used."},
			},
		},
		{Name: "SearchRequest", Of: searchRequest{}, Request: true, Doc: "",
			Fields: map[string]openapi.Schema{
				"query": {Description: "At most 4 KiB."},
				"k":     {Description: "Passages to return: 5 by default, at most 20."},
			},
		},
		{Name: "Node", Of: nodeView{}, Doc: "A sandbox node enrolled with this control server (role control).",
			Fields: map[string]openapi.Schema{
				"status": {Enum: openapi.Enum("ready", "draining", "lost"), Description: "ready: connected, runs are placed on it; draining: connected, no new runs; lost: not " +
					"connected now."},
				"runs":         {Description: "Sessions (runs) it holds now."},
				"last_seen":    {Format: "date-time", Description: "When control last heard from it."},
				"max_sessions": {Description: "The most runs the node takes at once; 0: no bound."},
				"refused_connections": {Description: "Connections made with the node's credential while its relay was alive, refused (a copied " +
					"credential, or the node started twice), since control started; each is also logged."},
				"last_refused_at": {Format: "date-time", Description: "When the last of those was refused."},
			},
		},
		{Name: "WaitingChangeSet", Of: waitingView{}, Doc: "A change set that waits for the caller's decision, as the inbox lists it: no entries, " +
			"their counts.",
			Fields: map[string]openapi.Schema{
				"run_id":          {Description: "The run that made it; null when no run did."},
				"status":          {Enum: openapi.Enum("pending")},
				"pending_entries": {Minimum: openapi.Int(0), Description: "Entries (files) still waiting for a decision."},
				"total_entries":   {Minimum: openapi.Int(0), Description: "Entries in all, decided ones and protected ones included."},
				"disk_bytes": {Minimum: openapi.Int(0), Description: "What the set's staged tree holds on the server's disk while it waits: counted against the " +
					"agent's limits.pending_disk_bytes, and the server's bounds on all one person's agents " +
					"(`--pending-disk-per-user`) and on every agent (`--pending-disk-total`). Rejecting it " +
					"frees it."},
				"created_at": {Format: "date-time"},
				"expires_at": {Format: "date-time", Description: "After this nobody may decide it: it is never applied."},
			},
		},
		{Name: "Setup", Of: setupView{}, Doc: "What a browser needs before anyone signs in, and nothing else.",
			Fields: map[string]openapi.Schema{
				"first_run": {Description: "No account exists yet: the next one made (by signup, or `corral user create` on the " +
					"server) is the server's administrator."},
				"signup": {Enum: openapi.Enum("open", "invite", "closed"), Description: "How accounts are made: `open` to anyone, `invite` with an invite, `closed` only on the " +
					"server's command line."},
			},
		},
		{Name: "Models", Of: modelsView{}, Doc: "The models an agent may be set to: the server's default model first, then the others the " +
			"provider lists on its own `GET /models` (asked at most every five minutes while it " +
			"answers). Never the provider's address or key.",
			Fields: map[string]openapi.Schema{
				"models":     {Description: "Empty when no provider is configured."},
				"models.id":  {Description: "The model's name, as an agent's `model` takes it."},
				"default":    {Description: "The model of an agent whose `model` is \"\"; \"\" when the server names none."},
				"configured": {Description: "Whether a model provider is configured; false means messages are refused until one is."},
				"listed": {Description: "Whether the provider answered its list of models; false means `models` holds only the " +
					"default, and any other name the provider serves may still be set."},
			},
		},
		{Name: "LimitDefaults", Of: limitsFields{}, Doc: "An agent's limits as the server applies them when the agent leaves them 0. null: there is " +
			"no limit.",
		},
		{Name: "LimitsInfo", Of: limitsAnswer{}, Doc: "The server's defaults and bounds for an agent's limits, from the constants that apply them.",
			Fields: map[string]openapi.Schema{
				"max": {Description: "The most each field may be set to; a larger value is refused with 400."},
				"notes": {Description: "By field name, where a default is more than a number: `cpu_millis` follows the run's time " +
					"limit (one core for the whole run), `memory_bytes` is raised to what an agent CLI needs, " +
					"`max_runs` has no limit."},
			},
		},
		{Name: "Egress", Of: egressFields{}, Doc: "An agent's allow-list: presets by name, and hosts of its own.",
			Fields: map[string]openapi.Schema{
				"allow":   {MaxItems: openapi.Int(100), Description: "Hosts of the agent's own."},
				"presets": {Description: "Well-known registries by name (GET /api/egress/presets)."},
			},
		},
		{Name: "EgressRule", Of: egressRuleView{}, Doc: "One allowed host, or every host under a suffix (`*.example.com` matches a.example.com, not example.com).",
			Fields: map[string]openapi.Schema{
				"host":    {MinLength: openapi.Int(1), Description: "A DNS name, an IP address, or `*.` and a name of two labels or more; lower-cased."},
				"ports":   {MaxItems: openapi.Int(16), Description: "Ports 1 to 65535; none: 80 and 443."},
				"methods": {MaxItems: openapi.Int(16), Description: "HTTP methods in upper case; none: any."},
				"paths":   {MaxItems: openapi.Int(32), Description: "Path prefixes, each starting with `/`; none: any. A request's path is cleaned before it is matched."},
			},
		},
		{Name: "EgressPreset", Of: presetView{}, Doc: "A well-known registry and the hosts it allows.",
			Fields: map[string]openapi.Schema{
				"name":  {Description: "The preset's name, as policy.egress.presets takes it."},
				"hosts": {Description: "The hosts it allows."},
			},
		},
		{Name: "Secret", Of: secretView{}, Doc: "An agent secret. There is no field for the value: it is never answered.",
			Fields: map[string]openapi.Schema{
				"id":     {Description: "The secret's id."},
				"name":   {Description: "Its name, unique among the agent's."},
				"host":   {Description: "The host whose requests carry it: lower case, no port."},
				"header": {Description: "The header it is sent as, in canonical form."},
			},
		},
		{Name: "SecretRequest", Of: secretRequest{}, Request: true, Doc: "The body of adding an agent secret.",
			Fields: map[string]openapi.Schema{
				"name":   {MinLength: openapi.Int(1), Description: "A name, as a credential's."},
				"host":   {MinLength: openapi.Int(1), Description: "A DNS name or an IP address, without a port."},
				"header": {MinLength: openapi.Int(1), Description: "An HTTP header name (`Authorization`, `X-Api-Key`); not one that frames the request (Host, Content-Length, Transfer-Encoding, Connection, Proxy-*, ...)."},
				"value":  {MinLength: openapi.Int(1), MaxLength: openapi.Int(4096), Description: "The header's value: no line breaks or control characters. Never answered."},
			},
		},
		{Name: "CredentialPatch", Of: credentialPatch{}, Request: true, Required: []string{"repositories"}, Doc: "What of a credential changes: the repositories it may be used for (replaced whole).",
			Fields: map[string]openapi.Schema{
				"repositories": {Description: "The repositories it may be used for, as patterns host/path in which * stands for any part " +
					"of one segment (`github.com/acme/app`, `github.com/acme/*`; a leading https:// and a " +
					"trailing .git are dropped); on the credential's host. It is used for no other repository, " +
					"by anyone: a clone or push naming it for another answers 403. Empty: it is used for " +
					"nothing."},
			},
		},
	}, opsComponents()...)
}

// errorCodes are the codes an error may carry: those statusOf maps, by
// status.
func errorCodes() []any {
	codes := slices.Collect(maps.Keys(statusOf))
	slices.SortFunc(codes, func(a, b string) int {
		return cmp.Or(cmp.Compare(statusOf[a], statusOf[b]), cmp.Compare(a, b))
	})
	return openapi.Enum(codes...)
}

// traceTypes are the events a run's trace, or an agent's own chain,
// records: internal/trace's constants, which internal/api may not import
// (it reaches the rest of the project through internal/service only).
func traceTypes() []any {
	return openapi.Enum("admitted", "started", "message", "tool_call", "tool_result",
		"usage", "retry", "violation", "paused", "resumed", "quarantined",
		"ended", "reconciled", "reattached", "terminal_opened", "terminal_closed",
		"gateway_note", "transcript", "retrieved", "delegated", "delegation_refused",
		"agent_created", "cloned", "clone_failed", "pushed", "push_refused", "synced", "sync_refused", "egress_denied", "egress")
}

// runDrivers are what may run a run: an agent's driver, or a person at
// its terminal.
func runDrivers() []any {
	return openapi.Enum(slices.Insert(slices.Clone(corral.AgentDrivers), 1, corral.DriverTerminal)...)
}

// levels names access levels.
func levels(ls ...corral.Level) []any {
	out := make([]any, len(ls))
	for i, l := range ls {
		out[i] = l.String()
	}
	return out
}
