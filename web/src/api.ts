// The one place that talks to the API: same-origin fetches with the
// session cookie, JSON in and out, error answers turned into ApiError.

import { ApiError, errorFromAnswer, networkError } from './errors'
import type {
  Agent,
  AgentRequest,
  ChangeSet,
  Grant,
  GrantLevel,
  Items,
  Link,
  LinkLevel,
  Message,
  PostedMessage,
  Run,
  TraceEvent,
  User,
  WorkspaceFile,
} from './types'

let onUnauthenticated: () => void = () => {}

/** Sets what happens when any call answers 401 (the app goes to /login). */
export function setUnauthenticatedHandler(fn: () => void): void {
  onUnauthenticated = fn
}

async function request<T>(method: string, path: string, body?: unknown, opts: { quiet401?: boolean } = {}): Promise<T> {
  let res: Response
  try {
    res = await fetch(path, {
      method,
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
  signup: (email: string, name: string, password: string) =>
    request<{ user: User }>('POST', '/api/auth/signup', { email, name, password }, { quiet401: true }).then((a) => a.user),
  login: (email: string, password: string) =>
    request<{ user: User }>('POST', '/api/auth/login', { email, password }, { quiet401: true }).then((a) => a.user),
  logout: () => request<void>('POST', '/api/auth/logout', undefined, { quiet401: true }),

  agents: () => request<Items<Agent>>('GET', '/api/agents').then((a) => a.items),
  agent: (id: string) => request<Agent>('GET', `/api/agents/${enc(id)}`),
  createAgent: (body: AgentRequest) => request<Agent>('POST', '/api/agents', body),
  updateAgent: (id: string, body: AgentRequest) => request<Agent>('PATCH', `/api/agents/${enc(id)}`, body),
  deleteAgent: (id: string) => request<void>('DELETE', `/api/agents/${enc(id)}`),
  releaseAgent: (id: string) => request<Agent>('POST', `/api/agents/${enc(id)}/release`),

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

  runs: (id: string) => request<Items<Run>>('GET', `/api/agents/${enc(id)}/runs`).then((a) => a.items),
  run: (runId: string) => request<Run>('GET', `/api/runs/${enc(runId)}`),
  trace: (runId: string) => request<Items<TraceEvent>>('GET', `/api/runs/${enc(runId)}/trace`).then((a) => a.items),
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
}

export { ApiError }
