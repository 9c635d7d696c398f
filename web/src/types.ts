// The API's shapes, as internal/api/openapi.json describes them.

export type Level = 'viewer' | 'runner' | 'editor' | 'owner'
export type GrantLevel = Exclude<Level, 'owner'>
export type LinkLevel = 'viewer' | 'runner'

export interface User {
  id: string
  email: string
  name: string
  admin: boolean
  disabled?: boolean
  created_at?: string
}

export interface UserRef {
  id: string
  name: string
}

export interface Contact extends UserRef {
  email: string
}

export interface Policy {
  fs: 'read-only' | 'read-write'
  changes: 'review' | 'auto'
  network: 'none'
  exclude: string[]
  protected: string[]
  risky: string[]
  /** Whether the shared library (documents anyone publishes) is searched for the agent; false for a new agent. */
  library: boolean
}

export interface Limits {
  max_prompt_bytes: number
  max_runs: number
  run_timeout_s: number
  cpu_millis: number
  memory_bytes: number
  pids: number
  output_bytes: number
  disk_bytes: number
  disk_inodes: number
  pending_disk_bytes: number
}

export interface Budget {
  tokens: number
  used: number
  /** The ceilings of the model calls in flight. */
  reserved: number
  /** What a new call may still reserve; null for an unlimited budget. */
  left: number | null
}

export type AgentState = 'active' | 'paused' | 'quarantined'

/**
 * What runs an agent: `builtin` is Corral's own agent loop (the default);
 * the others are an agent CLI run inside the run's sandbox on the message,
 * its model calls going only to Corral's gateway.
 */
export type Driver = 'builtin' | 'codex' | 'claude-code' | 'opencode'

/** What ran a run: an agent's driver, or `terminal` (a person at the run's terminal, no model). */
export type RunDriver = Driver | 'terminal'

export interface Agent {
  id: string
  name: string
  instructions: string
  model: string
  driver: Driver
  owner: UserRef
  access: Level
  /**
   * Whether the caller accepted the agent as a delegation target of their runs (list_agents, delegate):
   * always true for its owner; for an agent shared with the caller, once they accepted it or joined a link of it.
   */
  accepted: boolean
  policy: Policy
  limits: Limits
  budget: Budget
  state: AgentState
  created_at: string
  updated_at: string
  /** How many of the agent's change sets wait for a person (status pending). */
  pending_changes?: number
}

/** The body of POST /api/agents and PATCH /api/agents/{id}: every field optional. */
export interface AgentRequest {
  name?: string
  instructions?: string
  model?: string
  driver?: Driver
  policy?: Partial<Pick<Policy, 'fs' | 'changes' | 'library'>>
  limits?: Partial<Limits>
  budget?: { tokens: number }
}

export interface Grant {
  user: Contact
  level: GrantLevel
  created_at: string
  /** Whether the grantee accepted the agent as a delegation target of their runs. */
  accepted: boolean
}

export interface Link {
  id: string
  level: LinkLevel
  token?: string
  created_at: string
}

export interface Message {
  id: string
  role: 'user' | 'assistant'
  content: string
  author: UserRef | null
  run_id: string | null
  created_at: string
  /** On an assistant answer that drew on documents: which, and how sure retrieval was. Absent or empty otherwise. */
  sources?: MessageSource[]
}

export type RunStatus =
  | 'admitted'
  | 'running'
  | 'paused'
  | 'completed'
  | 'cancelled'
  | 'killed'
  | 'errored'
  | 'reconciled'

export interface Run {
  id: string
  agent_id: string
  status: RunStatus
  triggered_by: UserRef | null
  /** The run whose `delegate` tool started this one; null for a run a person started. */
  parent_run_id: string | null
  /** The run a person started that this one descends from; its own id for such a run. */
  root_run_id: string
  /** Delegation hops from the root run: 0 for the root. */
  depth: number
  message_id: string
  /**
   * builtin: the agent loop; terminal: a person at the run's terminal, no
   * model; codex, claude-code, opencode: that agent CLI ran in the sandbox.
   * Absent from a server older than drivers: builtin.
   */
  driver?: RunDriver
  change_set_id: string | null
  tokens: { input: number; output: number }
  violation: string | null
  reason: string
  created_at: string
  started_at: string | null
  ended_at: string | null
}

export interface PostedMessage {
  message: Message
  run: Run
}

export type TraceType =
  | 'admitted'
  | 'started'
  | 'message'
  | 'tool_call'
  | 'tool_result'
  | 'usage'
  | 'violation'
  | 'paused'
  | 'resumed'
  | 'quarantined'
  | 'ended'
  | 'reconciled'
  | 'transcript'
  | 'gateway_note'
  | 'delegated'
  | 'delegation_refused'
  | 'agent_created'
  | 'retrieved'

export interface TraceEvent {
  seq: number
  at: string
  type: TraceType | string
  data: Record<string, unknown>
  hash: string
  prev_hash: string
}

export type ChangeClass = 'ordinary' | 'risky' | 'protected'
/** A set stays `pending` while any of its entries is pending, also after a partial decision. */
export type ChangeStatus = 'pending' | 'applied' | 'rejected' | 'denied' | 'conflicted' | 'expired' | 'failed'

/**
 * Why an entry is not ordinary: `symlink`, `hardlink`, `device`, `setuid`,
 * `escape`, `internal`, `name` (the path breaks a name rule: protected) and
 * `collision` (it collides with another entry or an existing file after
 * Unicode normalisation or case folding: risky). A newer server may send
 * others, so any string is kept.
 */
export type ChangeFlag = 'symlink' | 'hardlink' | 'device' | 'setuid' | 'escape' | 'internal' | 'name' | 'collision' | (string & {})

/** Where one entry stands: it is decided on its own since partial decisions. */
export type ChangeEntryState = 'pending' | 'applied' | 'rejected' | 'denied' | 'dropped' | 'conflicted'

export interface ChangeEntry {
  /** The name as the API takes it back in `paths`; never shown when it differs from path_escaped. */
  path: string
  /** The name exactly as on disk, every unsafe byte escaped Go-style (`\n`, `\x1b`, `\u202e`, `\xff`). */
  path_escaped: string
  op: 'create' | 'modify' | 'delete'
  old_sha256: string
  new_sha256: string
  size: number
  mode: string
  class: ChangeClass
  flags: ChangeFlag[]
  /** Why the entry is classed or flagged as it is, in words; may be "". */
  note: string
  state: ChangeEntryState
  /** A unified diff for a text entry, kept after the set is decided. */
  diff?: string
}

export interface ChangeSet {
  id: string
  run_id: string | null
  agent_id: string
  status: ChangeStatus
  mode: 'review' | 'auto'
  entries: ChangeEntry[]
  created_at: string
  expires_at: string
  decided_by: UserRef | null
  decided_at: string | null
}

export interface FileEntry {
  name: string
  type: 'file' | 'dir'
  size: number
}

export interface WorkspaceFile {
  type: 'file' | 'dir'
  path: string
  size: number
  entries?: FileEntry[]
  content?: string
  content_base64?: string
}

export interface Items<T> {
  items: T[]
}

/** The answer of POST /api/agents/{id}/workspace/import. */
export interface ImportResult {
  files: number
  bytes: number
}

export type RepositoryStatus = 'cloning' | 'ready' | 'failed'

/** An agent's git repository: its workspace is the clone. */
export interface Repository {
  url: string
  ref: string
  head: string
  status: RepositoryStatus | (string & {})
  /** Why the clone failed, or that the last commit failed (the next one includes its files), in the server's words. */
  error?: string
  /** Percent done while cloning; 100 when ready. */
  progress?: number
  /** The last push from Corral, when there was one. */
  last_push?: { branch: string; head: string; at: string; by: UserRef | null }
}

/** The body of PUT /api/agents/{id}/repository. */
export interface RepositoryRequest {
  url: string
  ref?: string
  credential_id?: string
}

export interface Commit {
  sha: string
  author: { name: string; email: string }
  committed_at: string
  message: string
  /** The change set whose application made this commit, when one did. */
  change_set_id?: string | null
}

export interface PushResult {
  branch: string
  head: string
  /** How many commits the remote did not have. */
  commits: number
}

/** A code-host credential as the API answers it: never its secret. */
export interface Credential {
  id: string
  name: string
  host: string
  username: string
  /** The repositories it may be used for (host/path patterns); it is used for no other. */
  repositories: string[]
  created_at: string
}

export interface CredentialRequest {
  name: string
  host: string
  username: string
  secret: string
  repositories: string[]
}

/** Where a document lives: one agent's private store, or the shared library every agent may draw from. */
export type DocumentSource = 'private' | 'library'

/**
 * A document as GET /api/agents/{id}/documents and /api/library/documents
 * answer it (the API's `Document`; named Doc here because the DOM has a
 * Document type of its own).
 */
export interface Doc {
  id: string
  name: string
  source: DocumentSource
  bytes: number
  /** How many passages the index cut it into. */
  chunks: number
  /** Whether its passages have embeddings (an embedding model was configured and answered when it was indexed). */
  embedded?: boolean
  author: UserRef | null
  created_at: string
  /** Whether the caller may delete it: the server decides (a library document's author or an admin). */
  can_delete: boolean
}

/** One passage POST /api/agents/{id}/search found. */
export interface SearchHit {
  document_id: string
  chunk_id: string
  name: string
  source: DocumentSource
  /** The heading the passage sits under, when it has one. */
  heading?: string
  text: string
  /** The calibrated chance, 0 to 1, that the passage answers the query. */
  score: number
}

/** The answer of POST /api/agents/{id}/search. items is empty when answerable is false. */
export interface SearchResult {
  items: SearchHit[]
  /** How sure retrieval is that the passages answer the query, 0 to 1. */
  confidence: number
  answerable: boolean
  /** bm25: full-text ranking alone; fused: BM25 and embeddings together. */
  ranker: 'bm25' | 'fused' | (string & {})
  /** Why the ranking was degraded (the embedder unavailable, ...), when it was. */
  note?: string
}

/** A document an assistant answer drew on (a message's `sources`). */
export interface MessageSource {
  document_id: string
  name: string
  source: DocumentSource
  score: number
  confidence: number
}

/** A change set waiting for the caller's decision, as the inbox (GET /api/changes?status=pending) lists it. */
export interface WaitingChangeSet {
  id: string
  agent_id: string
  agent_name: string
  run_id: string | null
  status: 'pending'
  /** Entries (files) still waiting for a decision, and in all. */
  pending_entries: number
  total_entries: number
  /** What it holds on the server's disk while it waits: counted against the agent's, its owner's and the server's bounds; rejecting it frees it. */
  disk_bytes: number
  created_at: string
  expires_at: string
}

/** GET /api/setup: whether the server is brand new (the first account administers it), and how people sign up. */
export interface Setup {
  first_run: boolean
  signup: 'open' | 'invite' | 'closed'
}

/** GET /api/models: what an agent's model may be set to: the server's default first, then the others the provider lists. */
export interface ModelList {
  models: { id: string }[]
  /** The model of an agent whose model is ""; "" when the server names none. */
  default: string
  configured: boolean
  /** The provider answered its list of models; false: models holds only the default. */
  listed: boolean
}

/** GET /api/limits: an agent's limits when left 0 (null: no limit), and the most each may be. */
export interface LimitsInfo {
  defaults: Record<keyof Limits, number | null>
  max: Limits
  notes: Partial<Record<keyof Limits, string>>
}
