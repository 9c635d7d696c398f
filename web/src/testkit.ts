// Test doubles at the browser's edges, shared by the component tests: a
// fetch that answers by route, an XMLHttpRequest whose upload progress and
// answer the test drives, and an EventSource the test emits on. Only test
// files import this.

import { vi } from 'vitest'
import type { Egress, NetworkMode } from './egress'
import type { Action, Agent, Can, Level } from './types'

const levels: readonly Level[] = ['viewer', 'runner', 'editor', 'owner']

/**
 * The lowest level the server's policy (internal/access) allows each
 * action, as fixture data for agentAt: the app itself reads agent.can and
 * keeps no copy of the policy, so a stale row here misleads only a test.
 */
const lowest: Record<Action, Level> = {
  view_agent: 'viewer',
  read_messages: 'viewer',
  view_runs: 'viewer',
  view_changes: 'viewer',
  read_files: 'viewer',
  read_documents: 'viewer',
  send_message: 'runner',
  stop_own_run: 'runner',
  read_secrets: 'editor',
  stop_any_run: 'editor',
  kill_run: 'editor',
  edit_agent: 'editor',
  decide_changes: 'editor',
  write_files: 'editor',
  write_documents: 'editor',
  use_terminal: 'editor',
  set_budget: 'owner',
  share: 'owner',
  release: 'owner',
  delete_agent: 'owner',
}

/** What the server's agent view says a caller at level can do. */
export function canAt(level: Level): Can {
  return (Object.entries(lowest) as [Action, Level][]).filter(([, min]) => levels.indexOf(level) >= levels.indexOf(min)).map(([action]) => action)
}

export function agentAt(access: Level, id = 'agt_1'): Agent {
  return {
    id,
    name: 'helper',
    instructions: '',
    model: '',
    driver: 'builtin',
    owner: { id: 'usr_owner', name: 'Olive' },
    access,
    accepted: true,
    policy: { fs: 'read-write', changes: 'review', network: 'none', egress: { allow: [], presets: [] }, exclude: [], protected: [], risky: [], library: false },
    limits: { max_prompt_bytes: 0, max_runs: 0, run_timeout_s: 0, cpu_millis: 0, memory_bytes: 0, pids: 0, output_bytes: 0, disk_bytes: 0, disk_inodes: 0, pending_disk_bytes: 0 },
    budget: { tokens: 0, used: 0, reserved: 0, left: null },
    state: 'active',
    created_at: '2025-01-01T00:00:00Z',
    updated_at: '2025-01-01T00:00:00Z',
    pending_changes: 0,
    can: canAt(access),
  }
}

/** agentAt with a network and an egress allow-list (rules as the server answers them: every list present). */
export function agentWithEgress(access: Level, network: NetworkMode, egress: Egress): Agent {
  const a = agentAt(access)
  const allow = egress.allow.map((r) => ({ host: r.host, ports: r.ports ?? [], methods: r.methods ?? [], paths: r.paths ?? [] }))
  return { ...a, policy: { ...a.policy, network, egress: { allow, presets: egress.presets } } }
}

export interface Call {
  method: string
  url: string
  body: unknown
}

/** A route's answer: [status, body]; body undefined for none. */
export type Answer = [number, unknown?]

/**
 * Stubs fetch with route(method, path with query) → answer; every call is
 * recorded with its parsed JSON body. An unrouted call answers 599 so a test
 * sees it.
 */
export function serveRoutes(route: (method: string, url: string, body: unknown) => Answer | undefined): Call[] {
  const calls: Call[] = []
  vi.stubGlobal(
    'fetch',
    vi.fn(async (url: string, init?: RequestInit) => {
      const method = init?.method ?? 'GET'
      const body = typeof init?.body === 'string' ? JSON.parse(init.body) : undefined
      calls.push({ method, url, body })
      const a = route(method, url, body) ?? [599, { error: { code: 'internal', message: `unrouted ${method} ${url}` } }]
      const [status, b] = a
      return new Response(b === undefined || status === 204 ? null : JSON.stringify(b), { status })
    }),
  )
  return calls
}

/** An XMLHttpRequest the test drives: progress() reports upload bytes, answer() ends it. */
export class FakeXHR {
  static all: FakeXHR[] = []
  static get last(): FakeXHR | undefined {
    return FakeXHR.all[FakeXHR.all.length - 1]
  }
  upload: { onprogress: ((e: ProgressEvent) => void) | null } = { onprogress: null }
  onload: (() => void) | null = null
  onerror: (() => void) | null = null
  onabort: (() => void) | null = null
  status = 0
  responseText = ''
  method = ''
  url = ''
  withCredentials = false
  headers: Record<string, string> = {}
  body: unknown
  open(method: string, url: string) {
    this.method = method
    this.url = url
  }
  setRequestHeader(k: string, v: string) {
    this.headers[k] = v
  }
  getResponseHeader(): string | null {
    return null
  }
  send(body: unknown) {
    this.body = body
    FakeXHR.all.push(this)
  }
  progress(loaded: number, total: number) {
    this.upload.onprogress?.({ loaded, total, lengthComputable: true } as ProgressEvent)
  }
  answer(status: number, body?: unknown) {
    this.status = status
    this.responseText = body === undefined ? '' : JSON.stringify(body)
    this.onload?.()
  }
}

export function stubXHR() {
  FakeXHR.all = []
  vi.stubGlobal('XMLHttpRequest', FakeXHR)
}

/** An EventSource the test emits on (stub it with vi.stubGlobal('EventSource', FakeEventSource)). */
export class FakeEventSource {
  static CONNECTING = 0
  static OPEN = 1
  static CLOSED = 2
  static last: FakeEventSource | null = null
  readyState = 1
  listeners: Record<string, ((e: MessageEvent) => void)[]> = {}
  constructor(public url: string) {
    FakeEventSource.last = this
  }
  addEventListener(type: string, fn: (e: MessageEvent) => void) {
    ;(this.listeners[type] ??= []).push(fn)
  }
  close() {
    this.readyState = 2
  }
  emit(type: string, data: unknown) {
    for (const fn of this.listeners[type] ?? []) fn(new MessageEvent(type, { data: JSON.stringify(data) }))
  }
}
