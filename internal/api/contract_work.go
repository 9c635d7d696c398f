package api

import "corral/internal/openapi"

// workOperations documents the routes of what agents do and hold: runs,
// change sets, files, repositories and documents.
func workOperations() map[string]operation {
	return map[string]operation{
		"GET /api/agents/{id}/changes": {
			id: "listChanges", tags: []string{"changes"}, summary: "List the agent's change sets",
			doc: "viewer+. Newest first; entries without diffs.",
			replies: []reply{
				{status: 200, of: list[changeSetView]{}, doc: "The change sets."},
				{status: 401},
				{status: 404},
			},
		},
		"GET /api/changes/{id}": {
			id: "getChange", tags: []string{"changes"}, summary: "Read a change set",
			doc: "viewer+ on its agent. With a unified diff per text entry while it is pending. A change set " +
				"of an agent the caller cannot see answers 404 exactly like a missing one.",
			replies: []reply{
				{status: 200, of: changeSetView{}, doc: "The change set."},
				{status: 401},
				{status: 404},
			},
		},
		"POST /api/changes/{id}/approve": {
			id: "approveChange", tags: []string{"changes"}, summary: "Approve and apply a change set",
			doc: "editor+. Applies the pending entries named in paths (without a body: every pending entry " +
				"that is not protected), all or nothing among them; the others stay pending, and the set " +
				"stays pending while any entry is. Every base is checked first: an entry whose file changed " +
				"in the workspace since the run saw it becomes conflicted and nothing is applied (409 " +
				"naming it). 400 for a path that is not a pending entry, or a protected one; 409 when the " +
				"set expired or is no longer pending.",
			body: &body{of: decisionRequest{}, optional: true},
			replies: []reply{
				{status: 200, of: changeSetView{}, doc: "Applied."},
				{status: 400},
				{status: 401},
				{status: 403},
				{status: 404},
				{status: 409},
			},
		},
		"POST /api/changes/{id}/reject": {
			id: "rejectChange", tags: []string{"changes"}, summary: "Reject a change set",
			doc: "editor+. Rejects the pending entries named in paths (without a body: every pending entry); " +
				"the others stay pending. 400 for a path that is not a pending entry; 409 when the set " +
				"expired or is no longer pending.",
			body: &body{of: decisionRequest{}, optional: true},
			replies: []reply{
				{status: 200, of: changeSetView{}, doc: "Rejected."},
				{status: 400},
				{status: 401},
				{status: 403},
				{status: 404},
				{status: 409},
			},
		},
		"GET /api/agents/{id}/files": {
			id: "readFile", tags: []string{"files"}, summary: "Read the persistent workspace",
			doc: "viewer+. A directory listing or a file's content (at most 8 MiB). path goes through the " +
				"one path validator: dotfiles and dot-directories (.gitignore, .github/...) are ordinary " +
				"paths; '.', '..', control, bidi and invisible characters, trailing dots or spaces, .git " +
				"and its look-alikes and Windows device names are refused (400 invalid_name). Secret files " +
				"(.env, .env.*, policy.exclude) exist only for editors and owners: to a viewer or runner " +
				"they are absent from listings and answer 404.",
			query: []*openapi.Parameter{
				{Name: "path", In: "query", Schema: &openapi.Schema{Type: openapi.Types{"string"}}, Description: "Slash-separated path in the workspace; empty for its root. Each element must be a valid " +
					"name (see invalid_name); never absolute, never through a symbolic link out of the " +
					"workspace."},
			},
			replies: []reply{
				{status: 200, of: fileView{}, doc: "A listing or a file."},
				{status: 400},
				{status: 401},
				{status: 404},
				{status: 413},
			},
		},
		"PUT /api/agents/{id}/files": {
			id: "writeFile", tags: []string{"files"}, summary: "Upload one file into the persistent workspace",
			doc: "editor+. The request body is the file's bytes (at most 8 MiB), written atomically. The " +
				"path rules are those of GET. A run working on the workspace when the file changes is not " +
				"allowed to overwrite it: approving its change set later conflicts on that path.",
			query: []*openapi.Parameter{
				{Name: "path", In: "query", Required: true, Schema: &openapi.Schema{Type: openapi.Types{"string"}}, Description: "Slash-separated path in the workspace; empty for its root. Each element must be a valid " +
					"name (see invalid_name); never absolute, never through a symbolic link out of the " +
					"workspace."},
			},
			body: &body{media: []string{"application/octet-stream"}},
			replies: []reply{
				{status: 200, of: fileView{}, doc: "Written."},
				{status: 400},
				{status: 401},
				{status: 403},
				{status: 404},
				{status: 413},
			},
		},
		"DELETE /api/agents/{id}/files": {
			id: "deleteFile", tags: []string{"files"}, summary: "Delete a file or a directory of the persistent workspace",
			doc: "editor+. Deletes a file; a directory only with recursive=true (else 409 saying so), with " +
				"everything in it. The deletes go through the same journaled, all-or-nothing apply as a " +
				"change set; directories left empty under the path (and the path itself) are removed after. " +
				"Symbolic links are never followed nor deleted: a link at or under the path is a 409 naming " +
				"it, and nothing is deleted. A run working on the workspace meanwhile conflicts on the " +
				"deleted paths when its change set is approved.",
			query: []*openapi.Parameter{
				{Name: "path", In: "query", Required: true, Schema: &openapi.Schema{Type: openapi.Types{"string"}}, Description: "Slash-separated path of a file or directory in the workspace (the path rules of GET)."},
				{Name: "recursive", In: "query", Schema: &openapi.Schema{Type: openapi.Types{"boolean"}}, Description: "true to delete a directory and everything in it."},
			},
			replies: []reply{
				{status: 204, doc: "Deleted."},
				{status: 400},
				{status: 401},
				{status: 403},
				{status: 404},
				{status: 409},
			},
		},
		"GET /api/agents/{id}/runs": {
			id: "listRuns", tags: []string{"runs"}, summary: "List the agent's runs",
			doc: "viewer+. The agent's runs, newest first (at most 100).",
			replies: []reply{
				{status: 200, of: list[runView]{}, doc: "The runs."},
				{status: 401},
				{status: 404},
			},
		},
		"GET /api/runs/{id}": {
			id: "getRun", tags: []string{"runs"}, summary: "Read a run",
			doc: "viewer+ on the run's agent.",
			replies: []reply{
				{status: 200, of: runView{}, doc: "The run."},
				{status: 401},
				{status: 404},
			},
		},
		"GET /api/runs/{id}/trace": {
			id: "getTrace", tags: []string{"runs"}, summary: "Read a run's trace",
			doc: "viewer+. Every event of the run's trace, in order.",
			replies: []reply{
				{status: 200, of: list[traceView]{}, doc: "The trace."},
				{status: 401},
				{status: 404},
			},
		},
		"GET /api/runs/{id}/tree": {
			id: "getTree", tags: []string{"runs"}, summary: "Read a run's delegation tree",
			doc: "viewer+. The run and the runs it started through delegation, theirs and so on, oldest " +
				"first. A run appears only when the caller may view its agent and every run between it and " +
				"this one: a run the caller may not see hides what it started.",
			replies: []reply{
				{status: 200, of: list[runView]{}, doc: "The tree, as a list: each run's `parent_run_id` links it."},
				{status: 401},
				{status: 404},
			},
		},
		"GET /api/runs/{id}/events": {
			id: "runEvents", tags: []string{"runs"}, summary: "Follow a run live",
			doc: "viewer+. A `text/event-stream`: every trace event so far, then each new one as it happens " +
				"(`event: trace`, `id:` its seq, `data:` a TraceEvent), interleaved with `event: delta` " +
				"(`data: {\"content\": ...}`, the model's text as it streams) and `event: output` (`data: " +
				"{\"tool_call_id\": ..., \"content\": ...}`, a running tool's output as the command writes " +
				"it, its first 32 KiB; `id:` the last trace event's seq and how many bytes of the output came " +
				"so far, as `12.345`). Deltas and output are never stored: the whole message and the " +
				"tool's result follow as trace events. The stream closes after the run's `ended` event. " +
				"Access is checked again before every event and every 2 seconds: a watcher who loses access " +
				"gets one `event: error` (`data:` an Error) and the stream closes. A client that stops " +
				"reading is dropped once a write has waited 30 seconds. A client whose stream broke asks again with " +
				"`Last-Event-ID` set to the last `id:` it got (EventSource does so itself): the trace events after it follow, " +
				"and of a running tool's output only the bytes it did not have. A stream opened without it sends the " +
				"output so far from its first byte.",
			replies: []reply{
				{status: 200, media: []string{"text/event-stream"}, doc: "The event stream."},
				{status: 401},
				{status: 404},
				{status: 429, of: errorBody{}, headers: []header{{"Retry-After", "Whole seconds to wait before trying again."}}, doc: "429 `throttled`: this session (cookie or API token) already holds the most live event " +
					"streams it may (8), or the server as many as it allows in all; close one, or try again " +
					"after `Retry-After` seconds."},
			},
		},
		"POST /api/runs/{id}/stop": {
			id: "stopRun", tags: []string{"runs"}, summary: "Stop a run gracefully",
			doc: "runner+ for the caller's own runs, editor+ for anyone's. The run ends at its next safe " +
				"point (before a model call or a tool call) as `cancelled`; a running tool command gets " +
				"SIGTERM, then SIGKILL after 5 seconds. A paused run ends at once. The conversation so far " +
				"is kept, and what the run changed becomes a change set for review.",
			replies: []reply{
				{status: 202, of: runView{}, doc: "Stopping: the run as it was."},
				{status: 401},
				{status: 403},
				{status: 404},
				{status: 409},
			},
		},
		"POST /api/runs/{id}/kill": {
			id: "killRun", tags: []string{"runs"}, summary: "Kill a run at once",
			doc: "editor+. Every process of the run dies at once and its model call is abandoned; the run " +
				"ends as `killed`. The conversation so far is kept, and what the run changed becomes a " +
				"change set for review.",
			replies: []reply{
				{status: 202, of: runView{}, doc: "Killing: the run as it was."},
				{status: 401},
				{status: 403},
				{status: 404},
				{status: 409},
			},
		},
		"POST /api/agents/{id}/workspace/import": {
			id: "importWorkspace", tags: []string{"files"}, summary: "Import a tar, tar.gz or zip archive into the persistent workspace",
			doc: "editor+. The body is the archive, told by Content-Type (application/x-tar, " +
				"application/gzip, application/zip) or else by its first bytes; it is streamed, never held " +
				"whole in memory (a zip is spooled to a private file first: it needs random access). All or " +
				"nothing: every entry name goes through the one path validator (after one leading ./ is " +
				"stripped), and absolute paths, '..', .git, links (symbolic or hard: links are not " +
				"imported), devices, FIFOs, duplicate entries, entries that are one file on a " +
				"case-insensitive or normalising file system, and a file and a directory at one path are " +
				"refused with 400 (invalid_name or invalid_input) naming the entry; nothing is written. " +
				"Limits, counted on the bytes actually decompressed (413 too_large naming the limit): 1 GiB " +
				"in all, 100,000 files, 256 MiB for one file, 2 GiB of archive. Regular files keep their x " +
				"bit (0644 or 0755; setuid, setgid and sticky bits are dropped); empty directories are not " +
				"kept. An import creates and replaces files and never deletes one. It is applied through " +
				"the same journaled apply as a change set; a run working on the workspace meanwhile " +
				"conflicts on the imported paths when its change set is approved.",
			body: &body{media: []string{"application/x-tar", "application/gzip", "application/zip"}},
			replies: []reply{
				{status: 200, of: importView{}, doc: "Imported."},
				{status: 400},
				{status: 401},
				{status: 403},
				{status: 404},
				{status: 409},
				{status: 413},
			},
		},
		"GET /api/agents/{id}/workspace/archive": {
			id: "archiveWorkspace", tags: []string{"files"}, summary: "Download the persistent workspace as a tar.gz",
			doc: "viewer+. Streams the workspace as a gzip-compressed tar, with Content-Disposition: " +
				"attachment; filename=\"<agent name>.tar.gz\". Regular files (0644 or 0755) and directories " +
				"only: symbolic links are skipped, never followed; .git and any name the path validator " +
				"refuses are left out; secret files (.env, .env.*, policy.exclude) only for editors and " +
				"owners. A failure after the first byte breaks the connection, so a truncated download " +
				"never looks whole.",
			replies: []reply{
				{status: 200, media: []string{"application/gzip"}, doc: "The archive."},
				{status: 401},
				{status: 404},
			},
		},
		"PUT /api/agents/{id}/repository": {
			id: "cloneRepository", tags: []string{"repositories"}, summary: "Clone a git repository into the empty workspace",
			doc: "editor+. Starts a clone (https only; no user name or password in the URL; a host that is a " +
				"DNS name or an IP address) of ref (a branch or tag; the remote's default when absent) into " +
				"the agent's persistent workspace, which must be empty and have no run working on it (409 " +
				"otherwise). Answers at once with the repository cloning; GET shows progress and the " +
				"outcome (ready, or failed with error: authentication failed, host unreachable, ref not " +
				"found, too large). The credential is the agent owner's: credential_id must be one of the " +
				"owner's (404 otherwise) and name this repository among its `repositories` (403 otherwise, " +
				"for everyone, the owner included); without credential_id the clone is anonymous (no " +
				"credential is picked by host). A failed clone leaves nothing on disk. From then on each " +
				"applied change set and upload becomes one commit.",
			body: &body{of: repositoryRequest{}},
			replies: []reply{
				{status: 202, of: repositoryView{}, doc: "Cloning."},
				{status: 400},
				{status: 401},
				{status: 403},
				{status: 404},
				{status: 409},
				{status: 503},
			},
		},
		"GET /api/agents/{id}/repository": {
			id: "getRepository", tags: []string{"repositories"}, summary: "The agent's repository",
			doc: "viewer+. 404 when the agent has none.",
			replies: []reply{
				{status: 200, of: repositoryView{}, doc: "The repository."},
				{status: 401},
				{status: 404},
				{status: 503},
			},
		},
		"GET /api/agents/{id}/repository/commits": {
			id: "listRepositoryCommits", tags: []string{"repositories"}, summary: "The repository's newest commits",
			doc: "viewer+. At most 100, newest first; a commit that applied a change set names it.",
			replies: []reply{
				{status: 200, of: list[commitView]{}, doc: "The commits."},
				{status: 401},
				{status: 404},
				{status: 503},
			},
		},
		"POST /api/agents/{id}/repository/push": {
			id: "pushRepository", tags: []string{"repositories"}, summary: "Push the repository's commits to a branch",
			doc: "editor+. Pushes HEAD to branch on the remote (a fast-forward only) with the credential the " +
				"repository was set with, only to the agent's own repository, and only while that " +
				"credential still names it (403 otherwise). 409 with reason non_fast_forward, naming the " +
				"remote's head in the message, when the remote branch moved to a commit this repository " +
				"does not contain; 409 when the repository is not ready.",
			body: &body{of: pushRequest{}},
			replies: []reply{
				{status: 200, of: pushView{}, doc: "Pushed."},
				{status: 400},
				{status: 401},
				{status: 403},
				{status: 404},
				{status: 409},
				{status: 503},
			},
		},
		"POST /api/agents/{id}/repository/sync": {
			id: "syncRepository", tags: []string{"repositories"}, summary: "Bring the workspace to its remote branch",
			doc: "editor+. Fetches the branch the repository tracks with the credential it was set with, then " +
				"fast-forwards the workspace to it when the workspace holds no commit of its own, or rebases " +
				"Corral's commits onto it (each keeps its author, message and trailers; Corral commits). Only " +
				"while no run of the agent is active: 409 naming it. A change set that waits for review stays " +
				"pending and is named in `pending`: when decided, each entry whose file the sync changed is " +
				"conflicted (named, not applied), as for a lost update. 409 with reason sync_conflict, naming the paths " +
				"in conflict, when the rebase does not apply cleanly: nothing changed. 409 with reason " +
				"uncommitted when applied files wait for their commit; 409 when the repository is not ready.",
			replies: []reply{
				{status: 200, of: syncView{}, doc: "Synced (or already up to date)."},
				{status: 400},
				{status: 401},
				{status: 403},
				{status: 404},
				{status: 409},
				{status: 413},
				{status: 503},
			},
		},
		"GET /api/agents/{id}/trace": {
			id: "getAgentTrace", tags: []string{"repositories"}, summary: "Read an agent's own trace",
			doc: "viewer+. The agent's own hash-chained trace, outside its runs: `cloned` {url, ref, head, " +
				"by}, `clone_failed` {url, ref, error}, `pushed` {branch, head, commits, by}, " +
				"`push_refused` {branch, by, code, error}, `synced` {ref, status, head, upstream, rebased, by} " +
				"and `sync_refused` {ref, by, code, error}. The chain is named by the agent's id and checked " +
				"by `corral trace verify` like a run's.",
			replies: []reply{
				{status: 200, of: list[traceView]{}, doc: "The trace."},
				{status: 401},
				{status: 404},
			},
		},
		"GET /api/runs/{id}/terminal": {
			id: "runTerminal", tags: []string{"runs"}, summary: "Open the shell in a run's sandbox (websocket)",
			doc: "editor+. Upgrades to a websocket with an interactive shell in the run's session (one shell " +
				"per run; every viewer sees the same screen, and one who joins late first gets its last 64 " +
				"KiB). Binary frames carry terminal bytes both ways; a text frame from the client is a " +
				"control message, `{\"type\":\"resize\",\"cols\":N,\"rows\":M}`. Access is decided again " +
				"before every frame and every 2 seconds: a caller who loses it is closed with code 4403. " +
				"Close codes: 1000 the shell exited (the next open starts a new one), 4403 access revoked, " +
				"4404 the run has ended. Only a running run has a terminal. The trace records " +
				"`terminal_opened` and `terminal_closed` (who, bytes each way).",
			replies: []reply{
				{status: 101, doc: "Switching to the websocket."},
				{status: 401},
				{status: 403},
				{status: 404},
				{status: 409},
				{status: 429},
			},
		},
		"POST /api/agents/{id}/terminal": {
			id: "startTerminal", tags: []string{"runs"}, summary: "Start a terminal run",
			doc: "editor+. Admits a run with no model (`driver: \"terminal\"`), admitted like a message " +
				"(quarantine, budget, disk quota, busy) but with no prompt: its staged tree and sandbox are " +
				"a run's, and its terminal is opened with `GET /api/runs/{id}/terminal`. It lasts until it " +
				"is stopped or killed, or its time (`limits.run_timeout_s`) runs out; what it changed then " +
				"becomes a change set for review.",
			replies: []reply{
				{status: 201, of: terminalAnswer{}, doc: "Admitted: the run."},
				{status: 401},
				{status: 403},
				{status: 404},
				{status: 422},
				{status: 503},
			},
		},
		"POST /api/agents/{id}/documents": {
			id: "uploadDocument", tags: []string{"documents"}, summary: "Upload a private document of the agent",
			doc: "editor+. The body is the document's text: Markdown, plain text or source, UTF-8, at most " +
				"--document-max-bytes (4 MiB by default). PDF and binary files are refused (400 " +
				"invalid_content). It is cut into passages by its structure and indexed (FTS5, and " +
				"embeddings when an embedding model is configured).",
			query: []*openapi.Parameter{
				{Name: "name", In: "query", Required: true, Schema: &openapi.Schema{Type: openapi.Types{"string"}}, Description: "The document's name: a relative path (the one path validator). Corral's scaffolding is " +
					"refused: .corral, .git, .env*, the instruction files of agent tools (AGENTS.md, CLAUDE.md, " +
					".cursorrules, ...) and, for an agent's document, its policy's secret globs."},
			},
			body: &body{media: []string{"text/plain", "application/octet-stream"}},
			replies: []reply{
				{status: 201, of: documentView{}, doc: "Indexed."},
				{status: 400},
				{status: 401},
				{status: 403},
				{status: 404},
				{status: 413},
				{status: 503},
			},
		},
		"GET /api/agents/{id}/documents": {
			id: "listDocuments", tags: []string{"documents"}, summary: "List the agent's private documents",
			doc: "viewer+. Newest first.",
			replies: []reply{
				{status: 200, of: list[documentView]{}, doc: "The documents."},
				{status: 401},
				{status: 404},
				{status: 503},
			},
		},
		"DELETE /api/agents/{id}/documents/{doc_id}": {
			id: "deleteDocument", tags: []string{"documents"}, summary: "Delete a private document",
			doc: "editor+.",
			replies: []reply{
				{status: 204, doc: "Deleted."},
				{status: 401},
				{status: 403},
				{status: 404},
				{status: 503},
			},
		},
		"GET /api/egress/presets": {
			id: "listEgressPresets", tags: []string{"egress"}, summary: "The registries an allow-list may name by preset",
			doc: "Any signed-in user. Each preset (`policy.egress.presets`) with the hosts it allows.",
			replies: []reply{
				{status: 200, of: list[presetView]{}, doc: "The presets, by name."},
				{status: 401},
			},
		},
		"GET /api/agents/{id}/secrets": {
			id: "listSecrets", tags: []string{"egress"}, summary: "List the agent's secrets",
			doc: "viewer+. Names, hosts and headers, oldest first: never a value.",
			replies: []reply{
				{status: 200, of: list[secretView]{}, doc: "The secrets."},
				{status: 401},
				{status: 404},
				{status: 503, of: errorBody{}, doc: "503 `unavailable`: the server keeps no secrets (started without a secret key)."},
			},
		},
		"POST /api/agents/{id}/secrets": {
			id: "createSecret", tags: []string{"egress"}, summary: "Add a secret the egress proxy sends to one host",
			doc: "editor+. The value is sealed with the server's secret key (bound to the row, its agent and " +
				"host) and never answered, logged or traced, and never enters a sandbox: the egress proxy " +
				"adds `header: value` to the requests a run of the agent makes to `host` (replacing any the " +
				"run sent), terminating HTTPS for that host with the deployment's CA, which the sandbox trusts. " +
				"The host must also be on the allow-list to be reached.",
			body: &body{of: secretRequest{}},
			replies: []reply{
				{status: 201, of: secretView{}, doc: "Stored, without its value."},
				{status: 400},
				{status: 401},
				{status: 403},
				{status: 404},
				{status: 409, of: errorBody{}, doc: "409 `conflict`: the agent has a secret of that name."},
				{status: 413, of: errorBody{}, doc: "413 `too_large`: the value is over 4096 bytes."},
				{status: 503, of: errorBody{}, doc: "503 `unavailable`: the server keeps no secrets (started without a secret key)."},
			},
		},
		"DELETE /api/agents/{id}/secrets/{secret_id}": {
			id: "deleteSecret", tags: []string{"egress"}, summary: "Delete a secret",
			doc: "editor+. The next connection of a run goes without it.",
			replies: []reply{
				{status: 204, doc: "Deleted."},
				{status: 401},
				{status: 403},
				{status: 404},
				{status: 503},
			},
		},
		"POST /api/agents/{id}/search": {
			id: "searchDocuments", tags: []string{"documents"}, summary: "Search what the agent draws from",
			doc: "viewer+. Searches the agent's private documents and, when its `policy.library` is true, " +
				"the library, as the agent's search_documents tool does, access decided fresh. The answer " +
				"carries a calibrated confidence; below the threshold it is not answerable, and (unlike the " +
				"agent, which is told only that nothing relevant was found) a person still gets the " +
				"passages, to review.",
			body: &body{of: searchRequest{}},
			replies: []reply{
				{status: 200, of: retrievalView{}, doc: "What was found."},
				{status: 400},
				{status: 401},
				{status: 404},
				{status: 413},
				{status: 503},
			},
		},
		"POST /api/library/documents": {
			id: "publishDocument", tags: []string{"documents"}, summary: "Publish a document to the shared library",
			doc: "Any signed-in user. The agents whose `policy.library` is true draw from the library, its " +
				"passages marked to their models as untrusted reference material written by other people. " +
				"The body is the document's text: Markdown, plain text or source, UTF-8, at most " +
				"--document-max-bytes (4 MiB by default). PDF and binary files are refused (400 " +
				"invalid_content). It is cut into passages by its structure and indexed (FTS5, and " +
				"embeddings when an embedding model is configured).",
			query: []*openapi.Parameter{
				{Name: "name", In: "query", Required: true, Schema: &openapi.Schema{Type: openapi.Types{"string"}}, Description: "The document's name: a relative path (the one path validator). Corral's scaffolding is " +
					"refused: .corral, .git, .env*, the instruction files of agent tools (AGENTS.md, CLAUDE.md, " +
					".cursorrules, ...) and, for an agent's document, its policy's secret globs."},
			},
			body: &body{media: []string{"text/plain", "application/octet-stream"}},
			replies: []reply{
				{status: 201, of: documentView{}, doc: "Indexed."},
				{status: 400},
				{status: 401},
				{status: 413},
				{status: 503},
			},
		},
		"GET /api/library/documents": {
			id: "listLibrary", tags: []string{"documents"}, summary: "List the library",
			doc: "Any signed-in user. Newest first; can_delete says whether the caller (its author, or an " +
				"admin) may delete each.",
			replies: []reply{
				{status: 200, of: list[documentView]{}, doc: "The documents."},
				{status: 401},
				{status: 503},
			},
		},
		"DELETE /api/library/documents/{doc_id}": {
			id: "unpublishDocument", tags: []string{"documents"}, summary: "Delete a document of the library",
			doc: "Its author or an admin; anyone else 403.",
			replies: []reply{
				{status: 204, doc: "Deleted."},
				{status: 401},
				{status: 403},
				{status: 404},
				{status: 503},
			},
		},
		"GET /api/changes": {
			id: "listWaitingChanges", tags: []string{"changes"}, summary: "The change sets waiting for the caller",
			doc: "Any signed-in user: the inbox. Every pending change set, newest first, of the agents on " +
				"which the caller may decide change sets (editor+: what approve and reject need); a " +
				"viewer's or runner's inbox is empty. `status` must be `pending`: any other value is 400.",
			query: []*openapi.Parameter{
				{Name: "status", In: "query", Required: true, Schema: &openapi.Schema{Type: openapi.Types{"string"}, Enum: openapi.Enum("pending")}},
			},
			replies: []reply{
				{status: 200, of: list[waitingView]{}, doc: "The change sets waiting."},
				{status: 400},
				{status: 401},
			},
		},
	}
}
