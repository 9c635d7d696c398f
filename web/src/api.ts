// The one place that talks to the API: same-origin fetches with the
// session cookie, JSON in and out, error answers turned into ApiError.

import { ApiError, errorFromAnswer, networkError } from './errors'
import type { AgentRequestWithEgress, AgentSecret, EgressPreset, SecretRequest } from './egress'
import type {
  Agent,
  AgentBudget,
  ChangeSet,
  Commit,
  Credential,
  CredentialRequest,
  Doc,
  Grant,
  GrantLevel,
  ImportResult,
  Invite,
  Items,
  LimitsInfo,
  Link,
  LinkLevel,
  ListedUser,
  Message,
  ModelList,
  NodeInfo,
  PostedMessage,
  PushResult,
  Repository,
  RepositoryRequest,
  Run,
  RunInFlight,
  SearchResult,
  SyncResult,
  Setup,
  TraceEvent,
  Usage,
  UsageGroupBy,
  User,
  WaitingChangeSet,
  WorkspaceFile,
} from './types'

let onUnauthenticated: () => void = () => {}

/** Sets what happens when any call answers 401 (the app goes to /login). */
export function setUnauthenticatedHandler(fn: () => void): void {
  onUnauthenticated = fn
}

async function request<T>(
  method: string,
  path: string,
  body?: unknown,
  opts: { quiet401?: boolean; signal?: AbortSignal } = {},
): Promise<T> {
  let res: Response
  try {
    res = await fetch(path, {
      method,
      signal: opts.signal,
      credentials: 'same-origin',
      headers: { 'Content-Type': 'application/json', Accept: 'application/json' },
      body: body === undefined ? undefined : JSON.stringify(body),
    })
  } catch {
    throw networkError()
  }
  if (res.status === 204) return undefined as T
  const text = await res.text()
  let parsed: unknown = null
  if (text !== '') {
    try {
      parsed = JSON.parse(text)
    } catch {
      parsed = null
    }
  }
  if (!res.ok) {
    const err = errorFromAnswer(res.status, parsed, res.headers.get('Retry-After'))
    if (res.status === 401 && !opts.quiet401) onUnauthenticated()
    throw err
  }
  return parsed as T
}

/** How far an upload has gone: bytes sent of total (total 0 when unknown). */
export interface UploadProgress {
  loaded: number
  total: number
}

/**
 * Sends body as is (not JSON) with XMLHttpRequest, the one browser API that
 * reports upload progress, and answers like request: JSON on success, an
 * ApiError in the server's words otherwise.
 */
function upload<T>(path: string, body: Blob, contentType: string, onProgress?: (p: UploadProgress) => void): Promise<T> {
  return new Promise<T>((resolve, reject) => {
    const xhr = new XMLHttpRequest()
    xhr.open('POST', path)
    xhr.withCredentials = true
    xhr.setRequestHeader('Content-Type', contentType)
    xhr.setRequestHeader('Accept', 'application/json')
    if (onProgress) {
      xhr.upload.onprogress = (e: ProgressEvent) => onProgress({ loaded: e.loaded, total: e.lengthComputable ? e.total : body.size })
    }
    xhr.onerror = () => reject(networkError())
    xhr.onabort = () => reject(new ApiError(0, 'cancelled', 'The upload was cancelled.'))
    xhr.onload = () => {
      let parsed: unknown = null
      if (xhr.responseText) {
        try {
          parsed = JSON.parse(xhr.responseText)
        } catch {
          parsed = null
        }
      }
      if (xhr.status >= 200 && xhr.status < 300) {
        resolve(parsed as T)
        return
      }
      if (xhr.status === 401) onUnauthenticated()
      reject(errorFromAnswer(xhr.status, parsed, xhr.getResponseHeader('Retry-After')))
    }
    xhr.send(body)
  })
}

const enc = encodeURIComponent

/**
 * Approves or rejects some entries of a change set, or all pending ones when
 * paths is undefined. An empty list is refused here rather than sent: the
 * server reads a body without paths as "every pending entry", and ticking
 * nothing must never decide everything.
 */
function decide(changeId: string, verb: 'approve' | 'reject', paths?: string[]): Promise<ChangeSet> {
  if (paths !== undefined && paths.length === 0) {
    return Promise.reject(new ApiError(0, 'invalid_input', 'Tick at least one entry first.'))
  }
  return request<ChangeSet>('POST', `/api/changes/${enc(changeId)}/${verb}`, paths === undefined ? undefined : { paths })
}

export const api = {
  me: () => request<{ user: User }>('GET', '/api/me', undefined, { quiet401: true }).then((a) => a.user),
  /** invite: the token of an invite link, for a server whose signup is by invite. */
  signup: (email: string, name: string, password: string, invite?: string) =>
    request<{ user: User }>('POST', '/api/auth/signup', { email, name, password, invite: invite || undefined }, { quiet401: true }).then(
      (a) => a.user,
    ),
  login: (email: string, password: string) =>
    request<{ user: User }>('POST', '/api/auth/login', { email, password }, { quiet401: true }).then((a) => a.user),
  logout: () => request<void>('POST', '/api/auth/logout', undefined, { quiet401: true }),
  /** Whether the server is brand new (no account yet) and its signup mode; needs no sign-in. */
  setup: () => request<Setup>('GET', '/api/setup', undefined, { quiet401: true }),
  /** The models an agent may be set to (the server's default first); configured false when no provider is. */
  models: () => request<ModelList>('GET', '/api/models'),
  /** What each of an agent's limits is when left 0, and the most it may be. */
  limits: () => request<LimitsInfo>('GET', '/api/limits'),
  /** The inbox: every change set waiting for the caller's decision, newest first. */
  inbox: () => request<Items<WaitingChangeSet>>('GET', '/api/changes?status=pending').then((a) => a.items),

  agents: () => request<Items<Agent>>('GET', '/api/agents').then((a) => a.items),
  agent: (id: string) => request<Agent>('GET', `/api/agents/${enc(id)}`),
  createAgent: (body: AgentRequestWithEgress) => request<Agent>('POST', '/api/agents', body),
  /** Changes what body names; `policy.egress`, when sent, replaces the whole allow-list. */
  updateAgent: (id: string, body: AgentRequestWithEgress) => request<Agent>('PATCH', `/api/agents/${enc(id)}`, body),
  deleteAgent: (id: string) => request<void>('DELETE', `/api/agents/${enc(id)}`),
  releaseAgent: (id: string) => request<Agent>('POST', `/api/agents/${enc(id)}/release`),
  /** Accept an agent shared with the caller as a delegation target of their runs. */
  acceptAgent: (id: string) => request<void>('POST', `/api/agents/${enc(id)}/accept`),
  /** The well-known registries an agent's allow-list may name by preset, with their hosts. */
  egressPresets: () => request<Items<EgressPreset>>('GET', '/api/egress/presets').then((a) => a.items),
  /** The agent's secrets: name, host and header, never a value. */
  secrets: (id: string) => request<Items<AgentSecret>>('GET', `/api/agents/${enc(id)}/secrets`).then((a) => a.items),
  /** Stores a secret; the answer, like every later one, holds no value. */
  createSecret: (id: string, body: SecretRequest) => request<AgentSecret>('POST', `/api/agents/${enc(id)}/secrets`, body),
  deleteSecret: (id: string, secretId: string) => request<void>('DELETE', `/api/agents/${enc(id)}/secrets/${enc(secretId)}`),

  grants: (id: string) => request<Items<Grant>>('GET', `/api/agents/${enc(id)}/grants`).then((a) => a.items),
  grantByEmail: (id: string, email: string, level: GrantLevel) =>
    request<Grant>('POST', `/api/agents/${enc(id)}/grants`, { email, level }),
  setGrant: (id: string, userId: string, level: GrantLevel) =>
    request<Grant>('PUT', `/api/agents/${enc(id)}/grants/${enc(userId)}`, { level }),
  revokeGrant: (id: string, userId: string) => request<void>('DELETE', `/api/agents/${enc(id)}/grants/${enc(userId)}`),
  links: (id: string) => request<Items<Link>>('GET', `/api/agents/${enc(id)}/links`).then((a) => a.items),
  createLink: (id: string, level: LinkLevel) => request<Link>('POST', `/api/agents/${enc(id)}/links`, { level }),
  deleteLink: (id: string, linkId: string) => request<void>('DELETE', `/api/agents/${enc(id)}/links/${enc(linkId)}`),
  acceptLink: (token: string) => request<Agent>('POST', `/api/links/${enc(token)}/accept`),

  messages: (id: string) => request<Items<Message>>('GET', `/api/agents/${enc(id)}/messages`).then((a) => a.items),
  postMessage: (id: string, content: string) =>
    request<PostedMessage>('POST', `/api/agents/${enc(id)}/messages`, { content }),
  startTerminal: (id: string) => request<{ run: Run }>('POST', `/api/agents/${enc(id)}/terminal`).then((a) => a.run),

  runs: (id: string) => request<Items<Run>>('GET', `/api/agents/${enc(id)}/runs`).then((a) => a.items),
  run: (runId: string) => request<Run>('GET', `/api/runs/${enc(runId)}`),
  /** The run and the runs it started through delegation (theirs too), oldest first: those the caller may see. */
  tree: (runId: string, signal?: AbortSignal) =>
    request<Items<Run>>('GET', `/api/runs/${enc(runId)}/tree`, undefined, { signal }).then((a) => a.items),
  trace: (runId: string) => request<Items<TraceEvent>>('GET', `/api/runs/${enc(runId)}/trace`).then((a) => a.items),
  // Administrators only.
  users: () => request<Items<ListedUser>>('GET', '/api/users').then((a) => a.items),
  disableUser: (id: string) => request<{ user: User }>('POST', `/api/users/${enc(id)}/disable`).then((a) => a.user),
  enableUser: (id: string) => request<{ user: User }>('POST', `/api/users/${enc(id)}/enable`).then((a) => a.user),
  createInvite: () => request<Invite>('POST', '/api/invites'),
  nodes: () => request<Items<NodeInfo>>('GET', '/api/nodes').then((a) => a.items),
  /** Tokens and runs per agent, person or model, and per UTC day, from since (a date) on; an admin sees everyone's. */
  usage: (groupBy: UsageGroupBy, since: string) =>
    request<Usage>('GET', `/api/usage?group_by=${enc(groupBy)}&since=${enc(since)}`),
  /** Every run admitted, running or paused (an admin: every agent's). */
  runsInFlight: () => request<Items<RunInFlight>>('GET', '/api/runs?status=active').then((a) => a.items),
  budgets: () => request<Items<AgentBudget>>('GET', '/api/admin/budgets').then((a) => a.items),
  drainNode: (id: string) => request<unknown>('POST', `/api/nodes/${enc(id)}/drain`),
  undrainNode: (id: string) => request<unknown>('DELETE', `/api/nodes/${enc(id)}/drain`),
  moveAgent: (nodeId: string, agentId: string) => request<unknown>('POST', `/api/nodes/${enc(nodeId)}/agents`, { agent_id: agentId }),
  stopRun: (runId: string) => request<Run>('POST', `/api/runs/${enc(runId)}/stop`),
  killRun: (runId: string) => request<Run>('POST', `/api/runs/${enc(runId)}/kill`),
  runEventsURL: (runId: string) => `/api/runs/${enc(runId)}/events`,

  changes: (id: string) => request<Items<ChangeSet>>('GET', `/api/agents/${enc(id)}/changes`).then((a) => a.items),
  change: (changeId: string) => request<ChangeSet>('GET', `/api/changes/${enc(changeId)}`),
  /** Applies the entries named by paths (their `path`), all or nothing; without paths, every pending entry. */
  approve: (changeId: string, paths?: string[]) => decide(changeId, 'approve', paths),
  /** Rejects the entries named by paths; without paths, every pending entry. */
  reject: (changeId: string, paths?: string[]) => decide(changeId, 'reject', paths),

  files: (id: string, path: string) =>
    request<WorkspaceFile>('GET', `/api/agents/${enc(id)}/files?path=${enc(path)}`),
  /** Deletes a file, or a folder and all it holds when recursive (the server refuses a folder without it). */
  deleteFile: (id: string, path: string, recursive = false) =>
    request<void>('DELETE', `/api/agents/${enc(id)}/files?path=${enc(path)}${recursive ? '&recursive=true' : ''}`),
  /** Imports a tar, tar.gz or zip into the workspace, all or nothing, reporting upload progress. */
  importArchive: (id: string, archive: Blob, contentType: string, onProgress?: (p: UploadProgress) => void) =>
    upload<ImportResult>(`/api/agents/${enc(id)}/workspace/import`, archive, contentType, onProgress),
  /** Where the browser downloads the workspace as a tar.gz (a plain link: the cookie goes with it). */
  archiveURL: (id: string) => `/api/agents/${enc(id)}/workspace/archive`,

  /** The agent's repository; 404 when it has none. signal bounds one poll. */
  repository: (id: string, signal?: AbortSignal) =>
    request<Repository>('GET', `/api/agents/${enc(id)}/repository`, undefined, { signal }),
  /** Starts cloning into the (empty) workspace; the answer says `cloning`, then GET follows it. */
  setRepository: (id: string, body: RepositoryRequest) => request<Repository>('PUT', `/api/agents/${enc(id)}/repository`, body),
  commits: (id: string) => request<Items<Commit>>('GET', `/api/agents/${enc(id)}/repository/commits`).then((a) => a.items),
  // An empty branch: the repository's suggested_branch.
  push: (id: string, branch: string) => request<PushResult>('POST', `/api/agents/${enc(id)}/repository/push`, branch ? { branch } : {}),
  sync: (id: string) => request<SyncResult>('POST', `/api/agents/${enc(id)}/repository/sync`),

  /** The agent's documents, newest first. */
  documents: (id: string) => request<Items<Doc>>('GET', `/api/agents/${enc(id)}/documents`).then((a) => a.items),
  /** Uploads one document into the agent's private store (the raw bytes, as they are), reporting progress. */
  uploadDocument: (id: string, name: string, body: Blob, contentType: string, onProgress?: (p: UploadProgress) => void) =>
    upload<Doc>(`/api/agents/${enc(id)}/documents?name=${enc(name)}`, body, contentType, onProgress),
  deleteDocument: (id: string, docId: string) => request<void>('DELETE', `/api/agents/${enc(id)}/documents/${enc(docId)}`),
  /** Searches what the agent may draw from: its private documents and the library. */
  search: (id: string, query: string, k?: number) =>
    request<SearchResult>('POST', `/api/agents/${enc(id)}/search`, k === undefined ? { query } : { query, k }),
  libraryDocuments: () => request<Items<Doc>>('GET', '/api/library/documents').then((a) => a.items),
  /** Publishes one document to the shared library, reporting progress. */
  uploadLibraryDocument: (name: string, body: Blob, contentType: string, onProgress?: (p: UploadProgress) => void) =>
    upload<Doc>(`/api/library/documents?name=${enc(name)}`, body, contentType, onProgress),
  deleteLibraryDocument: (docId: string) => request<void>('DELETE', `/api/library/documents/${enc(docId)}`),

  credentials: () => request<Items<Credential>>('GET', '/api/credentials').then((a) => a.items),
  /** Stores a credential; the answer, like every later one, holds no secret. */
  createCredential: (body: CredentialRequest) => request<Credential>('POST', '/api/credentials', body),
  deleteCredential: (credId: string) => request<void>('DELETE', `/api/credentials/${enc(credId)}`),
  /** Replaces the repositories a credential may be used for. */
  setCredentialRepositories: (credId: string, repositories: string[]) =>
    request<Credential>('PATCH', `/api/credentials/${enc(credId)}`, { repositories }),
}

export { ApiError }
