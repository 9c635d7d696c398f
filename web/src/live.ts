// Following a run live: the state built from its event stream
// (GET /api/runs/{id}/events). A pure reducer, so it can be tested without
// an EventSource; LiveRun.tsx feeds it.

import { mergeEvents } from './timeline'
import type { Run, RunStatus, TraceEvent } from './types'

export type LiveStatus = RunStatus | 'connecting'

export interface LiveState {
  runId: string
  status: LiveStatus
  events: TraceEvent[]
  /** The model's text as it streams, until the whole message arrives as a trace event. */
  streaming: string
  /** The running tool's output as it comes, until its result arrives as a trace event. */
  toolOutput: string
  /** The tool call toolOutput belongs to. */
  toolCallId?: string
  /** The run is over (its `ended` event, or a final status read from the API). */
  ended: boolean
  /** Why it ended, in words, when the server said. */
  reason?: string
  changeSetId?: string | null
  /** The stream was cut off for good (access lost): shown, and nothing more is followed. */
  error?: string
}

export type LiveAction =
  | { type: 'trace'; event: TraceEvent }
  | { type: 'delta'; content: string }
  | { type: 'output'; toolCallId: string; content: string }
  | { type: 'error'; message: string }
  | { type: 'run'; run: Run }
  /** A new stream opened from the start (not a resumed one): it sends the running tool's output from its first byte. */
  | { type: 'reopened' }

/** How much of a running tool's output is kept on the page. */
export const maxLiveOutput = 64 * 1024

const terminal = new Set<string>(['completed', 'cancelled', 'killed', 'errored', 'reconciled'])

export function isTerminal(status: string): boolean {
  return terminal.has(status)
}

export function initialLive(runId: string, status: LiveStatus = 'connecting'): LiveState {
  return { runId, status, events: [], streaming: '', toolOutput: '', ended: isTerminal(status) }
}

/** The run's status after an event of this type, or undefined when the event does not change it. */
function statusAfter(ev: TraceEvent): LiveStatus | undefined {
  switch (ev.type) {
    case 'admitted':
      return 'admitted'
    case 'started':
    case 'resumed':
      return 'running'
    case 'paused':
      return 'paused'
    case 'reconciled':
      return 'reconciled'
    case 'ended': {
      const s = ev.data?.status
      return typeof s === 'string' && isTerminal(s) ? (s as RunStatus) : 'errored'
    }
    default:
      return undefined
  }
}

export function liveReducer(state: LiveState, action: LiveAction): LiveState {
  switch (action.type) {
    case 'trace': {
      const ev = action.event
      if (state.events.some((e) => e.seq === ev.seq)) return state // a reconnect replays the trace
      const next: LiveState = { ...state, events: mergeEvents(state.events, [ev]) }
      // The newest event decides the status; one replayed out of order must not.
      const newest = next.events[next.events.length - 1].seq === ev.seq
      const s = statusAfter(ev)
      if (s && newest && !state.ended) next.status = s
      if (ev.type === 'message') next.streaming = ''
      if (ev.type === 'tool_result' && ev.data?.id === state.toolCallId) {
        next.toolOutput = ''
        next.toolCallId = undefined
      }
      if (ev.type === 'ended' || ev.type === 'reconciled') {
        next.ended = true
        next.streaming = ''
        next.toolOutput = ''
        next.toolCallId = undefined
        if (s) next.status = s
        const reason = ev.data?.reason
        if (typeof reason === 'string' && reason !== '') next.reason = reason
        const cs = ev.data?.change_set_id
        if (typeof cs === 'string' || cs === null) next.changeSetId = cs
      }
      return next
    }
    case 'delta':
      if (state.ended || action.content === '') return state
      return { ...state, streaming: state.streaming + action.content }
    case 'reopened':
      return { ...state, toolOutput: '', toolCallId: undefined }
    case 'output': {
      if (state.ended || action.content === '') return state
      // Shown as it comes, the newest part kept when it grows long.
      const text = action.toolCallId === state.toolCallId ? state.toolOutput + action.content : action.content
      return { ...state, toolCallId: action.toolCallId, toolOutput: text.slice(-maxLiveOutput) }
    }
    case 'error':
      return { ...state, error: action.message, streaming: '', toolOutput: '' }
    case 'run': {
      const run = action.run
      if (run.id !== state.runId) return state
      if (isTerminal(run.status)) {
        return {
          ...state,
          status: run.status,
          ended: true,
          streaming: '',
          toolOutput: '',
          reason: run.reason || state.reason,
          changeSetId: run.change_set_id,
        }
      }
      if (state.ended) return state
      return { ...state, status: run.status }
    }
  }
}

/** Whether the stream should be closed: nothing more will come that we may see. */
export function finished(state: LiveState): boolean {
  return state.ended || state.error !== undefined
}

/** Parses an SSE data field, or undefined when it is not the JSON we expect. */
export function parseData<T>(data: unknown): T | undefined {
  if (typeof data !== 'string') return undefined
  try {
    return JSON.parse(data) as T
  } catch {
    return undefined
  }
}

/** A run's summary on its page: the run as last read, brought up to date by its event stream. */
export interface RunSummary {
  status: string
  reason: string
  tokens: { input: number; output: number }
  startedAt: string | null
  endedAt: string | null
  changeSetId: string | null
}

/**
 * The summary of run from what was read of it and what its stream said
 * since: the stream's status once it has one (the server writes a run's
 * last event before its final status, so a run read just after `ended` may
 * still say running), the tokens the trace counted when more than those
 * read (the `ended` event's total, else the `usage` events added up), and
 * the start and end the events give when the run read had none.
 */
export function summarize(run: Run, live?: LiveState): RunSummary {
  const s: RunSummary = {
    status: run.status,
    reason: run.reason,
    tokens: { ...run.tokens },
    startedAt: run.started_at,
    endedAt: run.ended_at,
    changeSetId: run.change_set_id,
  }
  if (!live || live.runId !== run.id) return s
  if (live.status !== 'connecting' && !(isTerminal(run.status) && !live.ended)) s.status = live.status
  if (live.reason && !run.reason) s.reason = live.reason
  if (live.changeSetId && !run.change_set_id) s.changeSetId = live.changeSetId
  let input = 0
  let output = 0
  for (const ev of live.events) {
    const d = ev.data ?? {}
    if (ev.type === 'usage') {
      input += typeof d.input === 'number' ? d.input : 0
      output += typeof d.output === 'number' ? d.output : 0
    }
    if (ev.type === 'started' && !s.startedAt) s.startedAt = ev.at
    if ((ev.type === 'ended' || ev.type === 'reconciled') && !s.endedAt) s.endedAt = ev.at
    const t = ev.type === 'ended' ? (d.tokens as { input?: unknown; output?: unknown } | undefined) : undefined
    if (t && typeof t === 'object') {
      input = typeof t.input === 'number' ? t.input : input
      output = typeof t.output === 'number' ? t.output : output
    }
  }
  s.tokens = { input: Math.max(s.tokens.input, input), output: Math.max(s.tokens.output, output) }
  return s
}
